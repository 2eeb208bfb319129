"""Pure decision logic: topology assignment, the admission cycle and the ungating planner.

Callers pass in snapshots (and `now` where time matters) and get values back; nothing here
calls the API, reads the clock, sleeps or logs above DEBUG.
"""
