"""The devcluster's request pipeline and storage: an emulated kube-apiserver without the HTTP.

`apiserver.ApiServer` validates, defaults, patches and stores objects (`store`, `watching`), with
built-in and CRD schemas, garbage collection, selectors and injectable faults. Used in-process by
the HTTP front, the webhook caller and the simulated components.
"""
