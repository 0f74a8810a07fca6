"""`loadproof run sessions --dataset FILE`: the users' messages from a data set, in place of the filler."""

from __future__ import annotations

from collections.abc import Callable

from loadproof.plans.datasets import DatasetRef
from loadproof.scenarios.sessions_options import SessionsOptions
from loadproof.workloads.datasets import DatasetSpec, content_text, resolve, select


def messages_from_dataset(
    opts: SessionsOptions, dataset: str, said: list[list[str]], status: Callable[[str], None]
) -> DatasetRef:
    """Replace the users' messages with the data set's (in place). A conversation per user where the rows
    are conversations (ShareGPT: its human turns; JSONL `messages`: its user messages; filler where one
    ends); otherwise one row's prompt per message, users x turns rows sampled with the seed. `dataset` is
    `opts.dataset`, given."""
    _, fmt = resolve(dataset, opts.dataset_format)
    spec = DatasetSpec(
        path=dataset,
        format=fmt,
        columns=dict(opts.dataset_columns),
        seed=opts.seed,
        repeat=True,
    )
    probe = select(
        DatasetSpec(
            path=dataset,
            format=fmt,
            columns=dict(opts.dataset_columns),
            sample="first",
            seed=opts.seed,
            repeat=True,
        ),
        1,
        lambda items: [0] * len(items),
    )
    conversations = bool(probe.items) and (probe.items[0].turns is not None or probe.items[0].messages is not None)
    n = opts.users if conversations else opts.users * opts.turns
    sel = select(spec, n, lambda items: [0] * len(items))
    from_data = 0
    for k, item in enumerate(sel.items):
        if conversations:
            texts = (
                item.turns
                if item.turns is not None
                else [content_text(m.get("content")) for m in item.messages or () if m.get("role", "user") == "user"]
            )
            places = [(k, t) for t in range(min(len(texts), opts.turns))]
        else:
            texts, places = [item.text()], [divmod(k, opts.turns)]
        for (u, t), text in zip(places, texts):
            said[u][t] = text if text.endswith("\n") else text + "\n"
            from_data += 1
    unit = "conversations" if conversations else "prompts"
    status(
        f"data set {sel.files[0]} ({sel.format}): {sel.usable} {unit}, {opts.users} users, {from_data} of "
        f"{opts.users * opts.turns} messages from it" + (" (filler where a conversation ends)" if conversations else "")
    )
    return DatasetRef(
        path=dataset,
        format=sel.format,
        files=sel.files,
        sha256=sel.sha256,
        columns=dict(opts.dataset_columns),
        sample="random",
        seed=opts.seed,
        repeat=True,
        rows=sel.rows,
        bad_rows=sel.bad_rows,
        no_prompt=sel.no_prompt,
        usable=sel.usable,
        repeated=sel.repeated,
        rows_sent=[i.row for i in sel.items],
        messages_from_data=from_data,
    )
