"""The development control plane: an emulated kube-apiserver plus simulated cluster components.

Used by the tests (as tasq's envtest) and by `tasq dev` / `tasq demo`; see devcluster/README.md.
"""
