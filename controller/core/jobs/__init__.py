"""Per-kind adapters of the job framework: pure transforms between a kind's objects and its Workload."""
