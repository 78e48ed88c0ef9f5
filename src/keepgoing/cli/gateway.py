"""``keepgoing gateway models | keys | usage``: the model gateway's configuration,
its keys (tokens with ``gateway.use`` and their limits) and the usage ledger.

The commands use the store directly (``--store``, else ``KEEPGOING_STORE``),
like ``keepgoing volume``; the configuration is ``--config``, else
``KEEPGOING_CONFIG``, else ``./keepgoing.toml``.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import typer
from rich.table import Table

from keepgoing._client.store_backend import current_user
from keepgoing._clock import system_clock
from keepgoing._durations import parse_duration
from keepgoing._gateway.config import load_config
from keepgoing._server import tokens
from keepgoing._server.group_keys import PREFIX as GROUP_PREFIX
from keepgoing._store.gateway_protocol import USAGE_GROUPS, GatewayKey, UsageQuery
from keepgoing.cli._app import app
from keepgoing.cli._common import JsonOption, StoreOption, add_row, cli_errors, console, emit_json
from keepgoing.cli.token import with_store
from keepgoing.errors import GroupNotFoundError, InvalidRequestError, TokenNotFoundError

gateway_app = typer.Typer(help="The model gateway: models, keys and usage.", no_args_is_help=True)
keys_app = typer.Typer(help="Gateway keys: tokens with gateway.use, and their limits.")
gateway_app.add_typer(keys_app, name="keys")
app.add_typer(gateway_app, name="gateway")

ConfigOption = Annotated[
    str | None,
    typer.Option(
        envvar="KEEPGOING_CONFIG",
        help="keepgoing.toml with the [gateway] table (default: ./keepgoing.toml).",
        show_default=False,
    ),
]
ModelsOption = Annotated[
    str | None,
    typer.Option("--models", help="Comma-separated model aliases the key may use (default: all)."),
]
RpmOption = Annotated[int | None, typer.Option("--rpm", min=1, help="Requests per minute.")]
TpmOption = Annotated[int | None, typer.Option("--tpm", min=1, help="Tokens per minute.")]
DailyOption = Annotated[
    float | None, typer.Option("--daily-budget", min=0, help="US dollars per UTC day.")
]
TotalOption = Annotated[
    float | None, typer.Option("--total-budget", min=0, help="US dollars in all.")
]


@gateway_app.command("models")
def models(config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """The model aliases, what they call, their fallbacks and prices (per million tokens).

    Provider keys are named by their environment variable and shown as set or
    missing, never printed.

    Example:

        keepgoing gateway models --config keepgoing.toml
    """
    with cli_errors():
        gateway = load_config(config)
    rows: list[dict[str, Any]] = []
    for name, route in sorted(gateway.models.items()):
        provider = gateway.providers[route.provider]
        price = route.price or gateway.price_of(route.model)
        key = (
            "-"
            if not provider.api_key_env
            else (f"{provider.api_key_env} ({'set' if provider.api_key() else 'missing'})")
        )
        rows.append(
            {
                "model": name,
                "provider": route.provider,
                "type": provider.type,
                "provider_model": route.model,
                "fallbacks": list(route.fallbacks),
                "price_input": price.input,
                "price_output": price.output,
                "key": key,
            }
        )
    if as_json:
        emit_json({"source": gateway.source, "prompts": gateway.prompts, "models": rows})
        return
    table = Table(title=f"models ({gateway.source})")
    for column in ("model", "provider", "provider model", "fallbacks", "$ in/out per 1M", "key"):
        table.add_column(column)
    for r in rows:
        add_row(
            table,
            r["model"],
            f"{r['provider']} ({r['type']})",
            r["provider_model"],
            ", ".join(r["fallbacks"]) or "-",
            f"{r['price_input']:g} / {r['price_output']:g}",
            r["key"],
        )
    console.print(table)


def _models(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    names = tuple(m.strip() for m in text.split(",") if m.strip())
    if not names:
        raise InvalidRequestError("--models needs at least one model alias")
    return names


@keys_app.command("create")
def keys_create(
    name: Annotated[str, typer.Option(help="A label for the key (who or what uses it).")],
    models: ModelsOption = None,
    rpm: RpmOption = None,
    tpm: TpmOption = None,
    daily_budget: DailyOption = None,
    total_budget: TotalOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a gateway key (a service token with gateway.use) and print it, once.

    Example:

        keepgoing gateway keys create --name support-agent --models fast --daily-budget 5
    """

    async def work(s: Any) -> tuple[Any, str, GatewayKey]:
        now = system_clock.now()
        record, secret = await tokens.create_token(
            s,
            name=name,
            kind="service",
            permissions=["gateway.use"],
            actor_kind="user",
            actor_id=current_user(),
            now=now,
        )
        key = GatewayKey(
            token_id=record.token_id,
            models=_models(models),
            requests_per_minute=rpm,
            tokens_per_minute=tpm,
            daily_budget=daily_budget,
            total_budget=total_budget,
            updated_at=now,
        )
        await s.set_gateway_key(key)
        return record, secret, key

    with cli_errors():
        _, secret, key = with_store(store, work)
    if as_json:
        emit_json({"token": secret, "key": key.to_json()})
        return
    console.print(f"created gateway key {key.token_id}; it is shown once:")
    console.print(secret, markup=False, highlight=False)


@keys_app.command("set")
def keys_set(
    token_id: Annotated[
        str,
        typer.Argument(
            help="The key's token id (kg_<id>_...), or group:<name> for a deployed group's "
            "keys (its limits hold across the group's revisions)."
        ),
    ],
    models: ModelsOption = None,
    rpm: RpmOption = None,
    tpm: TpmOption = None,
    daily_budget: DailyOption = None,
    total_budget: TotalOption = None,
    clear: Annotated[
        bool, typer.Option("--clear", help="Remove every limit first (then apply the given ones).")
    ] = False,
    store: StoreOption = None,
) -> None:
    """Change a key's limits; limits not given stay as they are (unless --clear).

    Example:

        keepgoing gateway keys set 3f2a9c1e5b2d4f60 --daily-budget 10 --rpm 60

        keepgoing gateway keys set group:wf-support-digest --total-budget 5
    """

    async def work(s: Any) -> GatewayKey:
        if token_id.startswith(GROUP_PREFIX):  # a group's keys, every revision's
            if await s.get_group(token_id[len(GROUP_PREFIX) :]) is None:
                raise GroupNotFoundError(
                    f"no group is named {token_id[len(GROUP_PREFIX) :]!r} "
                    "(see `keepgoing groups list`)"
                )
        else:
            token = await s.get_token(token_id)
            if token is None:
                raise TokenNotFoundError(f"no token has id {token_id!r}")
            if not token.allows("gateway.use"):
                raise InvalidRequestError(
                    f"token {token_id} does not have the gateway.use permission"
                )
        old = None if clear else await s.get_gateway_key(token_id)
        key = old or GatewayKey(token_id=token_id)
        changes: dict[str, Any] = {"updated_at": system_clock.now()}
        for field, value in (
            ("models", _models(models)),
            ("requests_per_minute", rpm),
            ("tokens_per_minute", tpm),
            ("daily_budget", daily_budget),
            ("total_budget", total_budget),
        ):
            if value is not None:
                changes[field] = value
        key = dataclasses.replace(key, **changes)
        await s.set_gateway_key(key)
        return key

    with cli_errors():
        key = with_store(store, work)
    console.print(f"key {key.token_id}: {_limits(key)}")


def _limits(key: GatewayKey | None) -> str:
    if key is None:
        return "no limits"
    parts = []
    if key.models is not None:
        parts.append("models " + ", ".join(key.models))
    for label, value in (
        ("rpm", key.requests_per_minute),
        ("tpm", key.tokens_per_minute),
        ("daily $", key.daily_budget),
        ("total $", key.total_budget),
    ):
        if value is not None:
            parts.append(f"{label} {value:g}")
    return "; ".join(parts) or "no limits"


@keys_app.command("list")
def keys_list(store: StoreOption = None, as_json: JsonOption = False) -> None:
    """Active tokens with gateway.use, their limits and what they have spent.

    Example:

        keepgoing gateway keys list --json
    """

    async def work(s: Any) -> list[dict[str, Any]]:
        now = system_clock.now()
        out = []
        for token in await s.list_tokens():
            if not token.allows("gateway.use"):
                continue
            key = await s.get_gateway_key(token.token_id)
            usage = await s.gateway_key_usage(token.token_id, now)
            out.append(
                {
                    "token_id": token.token_id,
                    "name": token.name,
                    "limits": key.to_json() if key else None,
                    "summary": _limits(key),
                    "spent_today": usage.day_cost,
                    "spent_total": usage.total_cost,
                }
            )
        for key in await s.list_gateway_keys():  # a group's limits, across its revisions
            if key.token_id.startswith(GROUP_PREFIX):
                usage = await s.gateway_key_usage(key.token_id, now)
                out.append(
                    {
                        "token_id": key.token_id,
                        "name": "(the group's keys)",
                        "limits": key.to_json(),
                        "summary": _limits(key),
                        "spent_today": usage.day_cost,
                        "spent_total": usage.total_cost,
                    }
                )
        return out

    with cli_errors():
        rows = with_store(store, work)
    if as_json:
        emit_json(rows)
        return
    table = Table(title="gateway keys")
    for column in ("token id", "name", "limits", "$ today", "$ total"):
        table.add_column(column)
    for r in rows:
        add_row(
            table,
            r["token_id"],
            r["name"],
            r["summary"],
            f"{r['spent_today']:.4f}",
            f"{r['spent_total']:.4f}",
        )
    console.print(table)


@gateway_app.command("usage")
def usage(
    since: Annotated[str, typer.Option(help="How far back: 30m, 24h, 7d (default 24h).")] = "24h",
    run: Annotated[
        str | None, typer.Option("--run", help="List the calls of one run id instead.")
    ] = None,
    by: Annotated[
        str | None,
        typer.Option("--by", help=f"Group by one of {', '.join(USAGE_GROUPS)} instead."),
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Usage per model from the ledger, or the calls of one run (with --run), or the
    ledger grouped by workflow, run, step, attempt, model or key (with --by).

    Example:

        keepgoing gateway usage --since 7d --by workflow
    """
    with cli_errors():
        window = parse_duration(since, what="--since")
        start = system_clock.now() - window
        if by is not None:
            _grouped(by, start, store, as_json)
            return
        if run is not None:
            calls = with_store(store, lambda s: s.list_gateway_calls(run_id=run, limit=1000))
            if as_json:
                emit_json([c.to_json() for c in calls])
                return
            table = Table(title=f"model calls of run {run}")
            for column in (
                "step",
                "attempt",
                "state",
                "model",
                "provider",
                "tokens",
                "$",
                "status",
            ):
                table.add_column(column)
            for c in reversed(calls):
                add_row(
                    table,
                    str(c.step),
                    str(c.attempt),
                    c.attempt_state,
                    c.model_answered or c.model_asked,
                    c.provider or "-",
                    f"{c.input_tokens}+{c.output_tokens}",
                    f"{c.cost:.6f}",
                    c.status,
                )
            console.print(table)
            return
        rows = with_store(store, lambda s: s.gateway_usage_by_model(since=start))
    if as_json:
        emit_json([dataclasses.asdict(r) for r in rows])
        return
    table = Table(title=f"usage since {since} ago")
    for column in ("model", "provider", "calls", "errors", "tokens in", "tokens out", "$", "avg s"):
        table.add_column(column)
    for r in rows:
        add_row(
            table,
            r.model,
            r.provider or "-",
            str(r.calls),
            str(r.errors),
            str(r.input_tokens),
            str(r.output_tokens),
            f"{r.cost:.6f}",
            f"{r.latency_sum / max(r.calls, 1):.3f}",
        )
    console.print(table)


def _grouped(by: str, start: float, store: str | None, as_json: bool) -> None:
    """``keepgoing gateway usage --by``: what GET /api/v1/gateway/usage answers."""
    query = UsageQuery(since=start, until=system_clock.now() + 1, group_by=by, limit=1000)
    report = with_store(store, lambda s: s.gateway_usage(query))
    if as_json:
        emit_json({"totals": report.totals, "groups": report.rows})
        return
    key = {"run": "run_id", "key": "key_id"}.get(by, by)
    table = Table(title=f"usage by {by}")
    for column in (by, "calls", "errors", "tokens in", "tokens out", "$", "avg s"):
        table.add_column(column)
    for r in report.rows:
        name = getattr(r, key, None) if by != "step" else f"{r.run_id} #{r.step}"
        if by == "attempt":
            name = f"{r.run_id} #{r.step} attempt {r.attempt} ({r.attempt_state})"
        add_row(
            table,
            "-" if name is None else str(name),
            str(r.calls),
            str(r.errors + r.refused),
            str(r.input_tokens),
            str(r.output_tokens),
            f"{r.cost:.6f}",
            f"{r.latency_avg or 0:.3f}",
        )
    console.print(table)
