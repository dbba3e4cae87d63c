"""`make bench`: the figures the manual shows (docs/benchmarks/). Deterministic round-trip counts, handler import
time as a ratio to `import boto3`, and latency/throughput against the local runtime."""
