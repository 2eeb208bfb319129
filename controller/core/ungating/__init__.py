"""The ungating planner: which gated pods of an admitted Workload go to which topology slice. Pure.

`plan_ungating(UngatingInput)` returns an `UngatingPlan`; the TopologyUngater in controller/kube
turns each `Ungate` into one pod patch.
"""

from controller.core.ungating.planning import PodState, Ungate, UngatingInput, UngatingPlan, plan_ungating

__all__ = ["PodState", "Ungate", "UngatingInput", "UngatingPlan", "plan_ungating"]
