"""The request vocabulary every engine layer speaks: a request's state (:mod:`.seq`: ``Seq``,
``Status``), its fan-out (:mod:`.fork_group`: ``ForkGroup``) and one step's plan (:mod:`.plan`:
``StepPlan``). It imports nothing from the KV memory, the schedulers or the engine loop."""
