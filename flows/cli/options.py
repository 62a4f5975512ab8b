"""The typer options several commands share, each declared once (name, type and help) as an Annotated alias.

An option whose help differs between commands (--out, --dry-run, --systems, ...) stays with its command:
the help is part of what the command says."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

# declared in flows.subset_options (flows.meta takes them too), re-exported beside the other shared options
from flows.subset_options import InstanceIds as InstanceIds
from flows.subset_options import Limit as Limit

# a release by folder (commands that read one) or by name (commands that write its next version)
ReleaseFolder = Annotated[
    Path, typer.Option("--release", help="the release folder: <name>/<version> in data/releases")
]
ReleaseName = Annotated[str, typer.Option("--release", help="release name")]

BuildConfig = Annotated[Path, typer.Option("--config", help="TOML build config")]
Domains = Annotated[list[str] | None, typer.Option("--domain", help="only these domains")]
AsJson = Annotated[bool, typer.Option("--json", help="print JSON")]
Kind = Annotated[str | None, typer.Option(help="source kind, e.g. edgar|arxiv (detected if omitted)")]
ScoresFolder = Annotated[Path, typer.Option("--scores", help="a `frame score` output folder")]

AllowFailedGold = Annotated[
    bool,
    typer.Option(
        "--allow-failed-gold",
        help="write the release even if gold reports fail frame's own gates (`frame qa gold`)",
    ),
]
NoPreflight = Annotated[
    bool,
    typer.Option(
        "--no-preflight",
        help="skip the one request per LLM endpoint that checks it answers (keys still checked)",
    ),
]

# the data folder of `frame status` and `frame server ...`: its config's, or named
DataOption = Annotated[Path | None, typer.Option("--data", help="data folder (default: data)")]
ConfigOption = Annotated[Path | None, typer.Option("--config", help="TOML build config (its data folder)")]

# A model on the command line (flows.cli.models; docs/evaluate.md): each --model is one openai system
Models = Annotated[
    list[str] | None,
    typer.Option(
        "--model",
        help="openai/<model> on an OpenAI-compatible endpoint: one system named by the model; "
        "the run folder gets the equivalent config.toml",
    ),
]
ModelBaseUrls = Annotated[
    list[str] | None,
    typer.Option(
        "--model-base-url",
        help="the --model endpoint (ending in /v1): once for every --model, or once per --model in order "
        "(default: OpenAI's own, api.openai.com/v1)",
    ),
]
ModelArgs = Annotated[
    list[str] | None,
    typer.Option(
        "--model-arg",
        help="key=value of the --model systems' settings (temperature, max_output_tokens, context_tokens, "
        "strategy, api_key_env, ...); NAME:key=value sets it for the system NAME only",
    ),
]
JudgeModel = Annotated[
    str | None, typer.Option("--judge-model", help="openai/<model>: the LLM judge (implies --judge openai)")
]
JudgeBaseUrl = Annotated[
    str | None, typer.Option("--judge-base-url", help="the --judge-model endpoint (default: --model's)")
]
EmbedderModel = Annotated[
    str | None, typer.Option("--embedder-model", help="openai/<embedding model>: the embedder role")
]
EmbedderBaseUrl = Annotated[
    str | None,
    typer.Option("--embedder-base-url", help="the --embedder-model endpoint (default: --judge-base-url's)"),
]
