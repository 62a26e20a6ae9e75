"""Ways to run the system, kept out of the library's rooms: a plan with every party in this
process (``simulate``, the reference the gRPC runtime must agree with), the multi-process demo
(``demo``), the secure-sum demo (``secure_sum_demo``), CNFGNN's Table 7 comparison
(``comparison``), and the per-round progress output they and the gRPC server share
(``progress``). The command line (``secure_fedgraph.cli``) calls into these."""
