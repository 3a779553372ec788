"""Baselines run on the same scenarios and the same scripted model as planmode.

1. `tutorial`: LangGraph's plan-and-execute tutorial — plan, execute one step, replan after every step by
   rewriting the remaining plan.
2. `full_replan`: a dependency-aware executor that re-emits the whole plan as JSON when a step fails.
3. planmode itself with ``max_parallel=1`` (see `bench.systems.run_planmode`).

`bare_loop` is the floor for the framework-overhead figure: a LangGraph loop that does one step's work per
super-step and nothing else.
"""
