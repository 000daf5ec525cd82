"""The domain: what the service does, independent of HTTP and of how jobs are run.

Each module is a service the routes, the CLI (through HTTP) and the workers call, raising
domain errors (:mod:`service.errors`) the API maps to problem+json in one place:

- :mod:`~service.domain.submission` — plan → price → admit → dispatch, the one path of every job
  (:mod:`~service.domain.dispatching`: the dispatcher it is given; :mod:`~service.domain.execution`:
  which jobs an in-database dataset can run);
- :mod:`~service.domain.registration` — registering (validation, the label rule), retiring and
  withdrawing datasets; :mod:`~service.domain.claims` — one budget per data;
  :mod:`~service.domain.roots` — the roots open to an owner;
  :mod:`~service.domain.grants` — who may use a dataset;
- :mod:`~service.domain.principals` — principals and API keys;
- :mod:`~service.domain.evaluation` — private evaluation jobs, priced and run like fits;
- :mod:`~service.domain.released_model` — a released model packed, unpacked and scored;
  :mod:`~service.domain.prediction_warnings` — what a prediction's inputs fell outside of;
- :mod:`~service.domain.job_events` — job lifecycle log lines, read from the database.

Layer rule (docs/architecture.md, enforced by tests/unit/test_layers.py): the domain imports
the foundation, the math core, ``db``, ``data``, ``schemas`` and ``ledger`` — never ``api``,
``workers`` (it hands jobs to a :class:`~service.domain.submission.Dispatcher` it is given), the
CLI or the supervisor.
"""
