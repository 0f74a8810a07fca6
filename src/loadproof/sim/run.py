"""Serving the simulator with uvicorn on one port; the `refuse` fault closes the listening sockets.

The port is bound before anything is printed (a port another process holds is one line naming it, exit 2), the
simulated load (`load_s`) passes with the port bound and closed, and "sim listening" is printed once it listens.
Ctrl-C or SIGTERM ends it with exit 130 and a line saying it stopped."""

from __future__ import annotations

import asyncio
import time

import uvicorn

from loadproof.errors import Interrupted
from loadproof.protocol.ports import bind, listen
from loadproof.protocol.urls import base_url
from loadproof.sim.config import SimConfig
from loadproof.sim.server import RequireKey, SimServer
from loadproof.sim.text import tokenizer_path


def serve(config: SimConfig, host: str, port: int, api_key: str | None = None) -> None:
    sim = SimServer(config)
    app = RequireKey(sim.app, api_key) if api_key else sim.app
    # on SIGTERM or Ctrl-C, streams in flight are cut at once, as vLLM's server task is cancelled on a signal
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="critical",
            access_log=False,
            lifespan="on",
            timeout_keep_alive=75,
            timeout_graceful_shutdown=0,
        )
    )

    def refuse() -> None:  # stop accepting: new connections are refused, open ones carry on
        for listener in getattr(server, "servers", []):
            listener.close()

    sim.on_refuse = refuse
    remedy, holder = "pass --port", "another simulator or engine?"
    sock = bind(host, port, remedy, holder)
    try:
        if config.load_s:
            print(f"loading for {config.load_s / config.time_scale:g} s before listening", flush=True)
            time.sleep(config.load_s / config.time_scale)
        listen(sock, remedy, holder)
        _say_listening(config, host, port, api_key)
        asyncio.run(server.serve(sockets=[sock]))
    except KeyboardInterrupt:
        raise Interrupted("interrupted; the simulator stopped") from None
    finally:
        sock.close()


def _say_listening(config: SimConfig, host: str, port: int, api_key: str | None) -> None:
    print(
        f"sim listening on {base_url(host, port)}: model {config.model!r}, KV {config.kv_cache_tokens:,} tokens "
        f"({config.num_gpu_blocks:,} blocks of {config.block_size}), max_num_seqs {config.max_num_seqs}, "
        f"budget {config.max_num_batched_tokens} tokens/step, time x{config.time_scale:g}"
        + (f", faults {', '.join(config.faults.active)}" if config.faults.active else ""),
        flush=True,
    )
    print(f"tokenizer for exact-length prompts: {tokenizer_path()}", flush=True)
    if api_key:
        print("API key required on /v1", flush=True)
