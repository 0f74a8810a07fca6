"""Serving the simulator with uvicorn on one port; the `refuse` fault closes the listening sockets."""

from __future__ import annotations

import asyncio

import uvicorn

from loadproof.sim.config import SimConfig
from loadproof.sim.server import SimServer
from loadproof.sim.text import tokenizer_path


def serve(config: SimConfig, host: str, port: int) -> None:
    sim = SimServer(config)
    server = uvicorn.Server(uvicorn.Config(sim.app, host=host, port=port, log_level="critical",
                                           access_log=False, lifespan="on", timeout_keep_alive=75))

    def refuse() -> None:  # stop accepting: new connections are refused, open ones carry on
        for listener in getattr(server, "servers", []):
            listener.close()

    sim.on_refuse = refuse
    print(f"sim listening on http://{host}:{port}: model {config.model!r}, KV {config.kv_cache_tokens:,} tokens "
          f"({config.num_gpu_blocks:,} blocks of {config.block_size}), max_num_seqs {config.max_num_seqs}, "
          f"budget {config.max_num_batched_tokens} tokens/step, time x{config.time_scale:g}"
          + (f", faults {', '.join(config.faults.active)}" if config.faults.active else ""), flush=True)
    print(f"tokenizer for exact-length prompts: {tokenizer_path()}", flush=True)
    asyncio.run(server.serve())
