"""The protocol's orchestration, its top floor: the contexts a paper's plan runs in and the client
host that answers for it (contexts), one process wiring roles to a transport (local), a run
resumed from a checkpoint (resume), progress lines (progress) and the run's DP noise ledger
(noise_ledger). It uses every room below it: sum_backends/, collectives/, transports/, core/."""
