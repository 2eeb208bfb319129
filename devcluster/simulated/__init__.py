"""The simulated cluster components: nodes, Job controller, scheduler, kubelet, pod GC, events.

They read and write only through `devcluster.server.apiserver.ApiServer`, as real components go
through the API; `components.Components` runs them together on one clock.
"""
