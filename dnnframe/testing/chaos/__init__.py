"""A seeded chaos run: the distributed deployment the tests start (workers on two hosts, a
dedicated RabbitMQ node and PostgreSQL cluster or a SQLite file, the driver service, the
dashboard, Flower), a
workload through the REST API, faults from a schedule printed at the start (the same seed
replays it), and a checker of the invariants that must hold whatever the faults were.
``python -m dnnframe.testing.chaos --minutes N --seed S``."""
