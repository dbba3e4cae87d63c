"""The Lambda memory model of bench/lambda_memory.py: CPU stretched by the share of a vCPU a size
gets, the wait added, the price per million (duration billed per started ms), and the choice."""

from __future__ import annotations

import pytest

from bench.lambda_memory import FULL_VCPU_MB, SIZES_MB, choose, duration_ms, price_per_million


def test_cpu_stretches_below_a_full_vcpu_and_the_wait_does_not() -> None:
    assert duration_ms(10, 17, FULL_VCPU_MB) == 27
    assert duration_ms(10, 17, 2 * FULL_VCPU_MB) == 27  # no faster past one vCPU (one thread)
    assert duration_ms(10, 17, 128) == pytest.approx(10 * FULL_VCPU_MB / 128 + 17)


def test_the_price_is_requests_and_gb_seconds_billed_per_started_ms() -> None:
    assert price_per_million(1024, 10.0) == pytest.approx(0.20 + 0.010 * 0.0000133334 * 1e6)
    assert price_per_million(1024, 10.2) == price_per_million(1024, 11.0)
    assert price_per_million(512, 20.0) == price_per_million(1024, 10.0)


def rows(cpu: float, wait: float) -> dict[str, dict[str, float]]:
    out = {}
    for size in (*SIZES_MB, FULL_VCPU_MB):
        ms = duration_ms(cpu, wait, size)
        out[f"{size} MB"] = {"ms": ms, "usd_per_million": price_per_million(size, ms)}
    return out


def cold(cpu: float) -> dict[str, float]:
    return {f"{size} MB": duration_ms(cpu, 5, size) for size in (*SIZES_MB, FULL_VCPU_MB)}


def test_the_choice_is_the_cheapest_size_within_the_latency_bounds() -> None:
    # Mostly waiting: cheaper the smaller, and 128 MB stays within 10 ms of a full vCPU.
    assert choose({"read": rows(0.5, 5)}, cold(60)) == 128
    # A command of 8 ms CPU and 17 ms of AWS: 512 MB takes 1.7x a full vCPU, 768 MB 1.4x.
    assert choose({"command": rows(8, 17)}, cold(300)) == 768
    # A cold start of 500 ms CPU passes a second only from 1,024 MB.
    assert choose({"command": rows(8, 17)}, cold(500)) == 1024
    # Nothing within the bounds: the largest size.
    assert choose({"command": rows(100, 1)}, cold(5000)) == max(SIZES_MB)
