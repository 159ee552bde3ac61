"""Scheduler twin: gang and topology-aware placement of jobs on supernode clusters, and the openb
GPU-sharing experiment (FGD, Weng et al., ATC'23). See docs/scheduler.md."""
