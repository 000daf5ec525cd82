"""What the optimizers share: every module of :mod:`service.optimizers` outside this folder is
one algorithm (``OPTIMIZER = Cls``), every module here is a part.

- the interface: :mod:`.base` (``Optimizer``, ``ReleasePlan``, ``PrivacyTarget``), :mod:`.config`
  (typed configs), :mod:`.limits` (one cap per unit), :mod:`.inputs` (checked data, layouts);
- the catalog: :mod:`.registry` (the one place an optimizer is named: it discovers the algorithm
  modules), :mod:`.planning` (``plan_job``, plan JSON), :mod:`.one_vs_rest`;
- the kits several algorithms share: :mod:`.full_gradient`, :mod:`.gradient_kit`,
  :mod:`.accelerated_kit`, :mod:`.svrg_common`, :mod:`.sgd_common`, :mod:`.selection_kit`;
- a part of one algorithm: :mod:`.spider_run` (``dp_spiderboost``'s run, split out for size),
  :mod:`.dp_agd_row_map` (``dp_agd_averaged``'s row map: the mechanism and its proof).

Layer rule (tests/unit/test_layers.py): a kit imports other kits, ``models``, ``privacy`` and the
pure ledger modules (``ledger.accounting``, ``ledger.filter``) — never an algorithm module.
"""
