"""A fleet's metrics sources: every replica's /metrics and the router's (docs/fleet.md, "Measuring a fleet").

`--engine-metrics URL,URL,...` lists one source per replica, in order (replica 0 first), each as one
`--engine-metrics` takes it (`MetricsSource.parse`); `--router-metrics URL` is the router's Prometheus exposition
(vllm-router's `--prometheus-port`; its API port's /metrics is one worker's, forwarded). Without
`--engine-metrics` and given `--router-metrics` or `--router-policy`, a `--url` at vllm-router is asked its
`GET /workers` once (`discover`), and each worker's
/metrics beside its URL is a replica's source. What the run found is the manifest's `target.fleet`
(`describe`), each replica's KV cache with it (`with_caches`, its `cache_config_info`).
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, replace
from typing import Any

from loadproof.errors import UsageError
from loadproof.protocol.urls import url_of
from loadproof.routing import check_policy
from loadproof.telemetry.cache_config import CacheConfig, read_cache_config
from loadproof.telemetry.server_metrics import MetricsSource

# a list's items are split where a comma is followed by a scheme (`http://`, `prometheus+http://`, or a wrong one, to
# be refused by name): a Prometheus matcher's value keeps its commas
_ITEM = re.compile(r",\s*(?=[A-Za-z][A-Za-z0-9+.-]*://)")


def parse_sources(text: str) -> tuple[MetricsSource, ...]:
    """`--engine-metrics`: one source, or a comma-separated list (one a replica). ValueError, naming the item, for a
    source that does not parse or one listed twice."""
    items = [item.strip() for item in _ITEM.split(text.strip())]
    sources: list[MetricsSource] = []
    for n, item in enumerate(items, 1):
        if not item:
            raise ValueError(f"item {n} of the list is empty")
        try:
            source = MetricsSource.parse(item.rstrip(","))
        except ValueError as exc:
            raise ValueError(exc if len(items) == 1 else f"item {n} ({item}): {exc}") from None
        if any(s.url == source.url and s.matchers == source.matchers for s in sources):
            raise ValueError(f"{source.shown} is listed twice: one URL a replica")
        sources.append(source)
    return tuple(sources)


def parse_router(text: str) -> MetricsSource:
    """`--router-metrics`: the router's own Prometheus exposition (a bare http://HOST:PORT gets /metrics)."""
    source = MetricsSource.parse(text)
    if source.kind != "exposition":
        raise ValueError("the router's metrics are read from its exposition: http://HOST:PORT of its --prometheus-port")
    return source


def sources_option(value: Any) -> tuple[MetricsSource, ...] | None:
    """`--engine-metrics` as the options check it, once: one source, or one a replica."""
    if value is None or isinstance(value, tuple):
        return value
    if isinstance(value, MetricsSource):
        return (value,)
    return parse_sources(str(value))


def router_option(value: Any) -> MetricsSource | None:
    """`--router-metrics` as the options check it, once."""
    return value if value is None or isinstance(value, MetricsSource) else parse_router(str(value))


def policy_option(value: Any) -> str | None:
    """`--router-policy` as the options check it: one of vllm-router's policies."""
    if value is None:
        return None
    check_policy("vllm-router", str(value))
    return str(value)


@dataclass(frozen=True)
class Fleet:
    """Replicas behind a router, as a run measures them: each replica's metrics source (in order), the router's
    (None: not scraped), whether the replicas came from the router's /workers, the policy the user named, and each
    replica's KV cache as its /metrics described it (once resolved; None where it did not say)."""

    replicas: tuple[MetricsSource, ...]
    router: MetricsSource | None = None
    discovered: bool = False
    policy: str | None = None
    caches: tuple[CacheConfig | None, ...] = ()

    def with_caches(self) -> Fleet:
        """This fleet with each replica's KV cache read from its /metrics (one short request each)."""
        return replace(self, caches=tuple(read_cache_config(source, None) for source in self.replicas))

    def describe(self) -> dict[str, Any]:
        """For the manifest's `target.fleet` (the URLs go through the sanitizer at publish, like every URL)."""
        replicas = []
        for i, source in enumerate(self.replicas):
            cache = self.caches[i] if i < len(self.caches) else None
            replicas.append(
                {
                    "url": source.shown,
                    **(
                        {
                            "block_tokens": cache.block_tokens,
                            "num_blocks": cache.num_blocks,
                            "kv_tokens": cache.kv_tokens,
                        }
                        if cache is not None
                        else {}
                    ),
                }
            )
        return {
            "replicas": replicas,
            "router_metrics": self.router.shown if self.router is not None else None,
            "discovered": self.discovered,
            "policy": self.policy,
        }


def discover(router_url: str, api_key: str | None, timeout_s: float = 5) -> tuple[str, ...] | None:
    """The workers a vllm-router at `router_url` lists (`GET /workers`: `{"workers": [{"url": ...}, ...]}`), in its
    order; None where it answers no such list (an engine, a relay, another gateway: not a fleet we can read)."""
    request = urllib.request.Request(url_of(router_url, "/workers"))
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            answer = json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None
    workers = answer.get("workers") if isinstance(answer, dict) else None
    if not isinstance(workers, list) or not workers:
        return None
    urls = [w.get("url") for w in workers if isinstance(w, dict)]
    if not all(isinstance(u, str) and u.startswith(("http://", "https://")) for u in urls) or not urls:
        return None
    return tuple(str(u) for u in urls)


def fleet_of(
    sources: tuple[MetricsSource, ...],
    router: MetricsSource | None,
    policy: str | None,
    url: str,
    api_key: str | None,
) -> Fleet | None:
    """The fleet a run's options name: several `--engine-metrics`, or one with `--router-metrics`; without
    `--engine-metrics`, the workers a vllm-router at `url` lists (`discover`, asked once). None: one engine
    (UsageError where `--router-metrics` or `--router-policy` was given for one)."""
    if len(sources) > 1 or (sources and router is not None):
        return Fleet(sources, router, policy=policy)
    if not sources and (router is not None or policy is not None):  # told it is a fleet: ask the router
        workers = discover(url, api_key)
        if workers is not None:
            return Fleet(tuple(MetricsSource.beside(w) for w in workers), router, discovered=True, policy=policy)
    if router is not None or policy is not None:
        flag = "--router-metrics" if router is not None else "--router-policy"
        raise UsageError(
            f"{flag} needs a fleet: the replicas' metrics URLs as --engine-metrics URL,URL,... or --url at a "
            "vllm-router (its GET /workers lists them)"
        )
    return None
