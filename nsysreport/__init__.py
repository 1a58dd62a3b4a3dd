"""nsysreport: where multi-GPU step time goes, from Nsight Systems SQLite exports."""

__version__ = "0.1.0"
