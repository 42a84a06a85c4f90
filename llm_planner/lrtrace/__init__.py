"""LRTrace: trace and workload formats, the TimelyLLM artifact importer, the composer, simulation and reports."""
