"""The interactive report: a static site of every workload and the paper's figures."""
