"""Wire formats shared by the client, the relay and the simulator: SSE framing and OpenAI bodies."""
