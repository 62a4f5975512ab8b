"""One base for every LLM judge: prompt loading, the input budget, bounded parallel calls, validated replies.

Families only say what to ask (which roles, which reply models, how to cut the text); this base owns the
arithmetic of the context window and the call through `tasks.llm.client.LLMClient` (retries, cache,
schema validation happen there).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import AfterValidator, Field

from schemas.config import LLMSettings
from tasks.errors import FrameInputError
from tasks.llm import budget as budgets
from tasks.llm.client import LLMTruncatedError
from tasks.llm.prompts import Prompt, load_prompt, render
from tasks.tokens import count_tokens

__all__ = ["LLMJudge", "id_problems", "ids_check", "input_budget", "split_on_length", "stripped_text"]

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

RESERVE_TOKENS = 2000  # context kept free for message framing and token-count drift


def input_budget(settings: LLMSettings, reserve: int = RESERVE_TOKENS, roles: Sequence[str] = ()) -> int:
    """Tokens available for the rendered prompt of `roles`: context minus their largest output budget minus
    a framing reserve (at most a tenth of the context, so small local models keep most of theirs), less the
    tokenizer margin (tasks.llm.budget)."""
    return budgets.input_budget(settings, roles, reserve)


def id_problems(want: Sequence[Hashable], got: Sequence[Hashable]) -> tuple[list, list, list]:
    """(repeated, unknown, missing) ids of a reply that must name every id of `want` exactly once; repeated
    and unknown sorted, missing in the order of `want`."""
    seen = Counter(got)
    repeated = sorted(i for i, n in seen.items() if n > 1)
    return repeated, sorted(set(seen) - set(want)), [i for i in want if i not in seen]


def ids_check(
    want: Sequence[Hashable],
    ids_of: Callable[[Any], Sequence[Hashable]],
    explain: Callable[[list, list, list], str],
) -> Callable[[Any], None]:
    """A reply `check` for the client: the ids of a reply (`ids_of`) must be exactly `want`, each once;
    otherwise ValueError(explain(repeated, unknown, missing)), sent back to the model in the retry."""

    def check(reply: Any) -> None:
        problems = id_problems(want, ids_of(reply))
        if any(problems):
            raise ValueError(explain(*problems))

    return check


def split_on_length(ask: Callable[[T], R], part: T, halve: Callable[[T], Sequence[T]], what: str) -> list[R]:
    """`ask(part)`, or when its reply reached the output budget, `ask` of each piece `halve(part)` gives
    (recursively): the input is split, never sent again as is. A part that cannot be cut fails."""
    try:
        return [ask(part)]
    except LLMTruncatedError as exc:
        pieces = list(halve(part))
        if len(pieces) < 2:
            raise
        log.warning(
            "%s: the reply reached the output budget of %d tokens; asking for it in %d pieces",
            what,
            exc.budget,
            len(pieces),
        )
        return [r for p in pieces for r in split_on_length(ask, p, halve, what)]


def stripped_text(empty: str) -> Any:
    """The type of a required string of a reply: stripped; a blank one is refused with the message `empty`
    (which the client sends back to the model in its corrective retry)."""

    def strip(v: str) -> str:
        if not v.strip():
            raise ValueError(empty)
        return v.strip()

    return Annotated[str, Field(min_length=1), AfterValidator(strip)]


class LLMJudge:
    """Base of the LLM judges: `ROLES` are the prompt files (prompts/<role>.md) the judge uses."""

    ROLES: ClassVar[tuple[str, ...]] = ()
    RESERVE: ClassVar[int] = RESERVE_TOKENS

    def __init__(self, client: Any, settings: LLMSettings, *, ctx: Any = None) -> None:
        self.client = client
        self.settings = settings
        self.ctx = ctx
        self.name = f"openai:{settings.model}"
        self.prompts: dict[str, Prompt] = {r: load_prompt(r) for r in self.ROLES}
        self.last_calls: list[dict[str, Any]] = []  # accounting of the last judgment (tests, logs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.settings.model!r})"

    @property
    def prompt_sha256(self) -> dict[str, str]:
        return {r: p.sha256 for r, p in self.prompts.items()}

    def input_budget(self) -> int:
        return input_budget(self.settings, self.RESERVE, self.ROLES)

    def output_budget(self, role: str) -> int:
        return self.settings.output_budget(role)

    def overhead(self, role: str | Prompt, **blank: Any) -> int:
        """Tokens of the prompt of `role` rendered with `blank` (empty) variables."""
        prompt = self.prompts[role] if isinstance(role, str) else role
        return sum(count_tokens(m["content"]) for m in render(prompt, **blank))

    def room(
        self, role: str, need: int, what: str, *, spare: int = 0, cap: int | None = None, **blank: Any
    ) -> int:
        """Tokens left for the text of one `role` request (budget minus prompt minus `spare`, at most `cap`);
        an input error naming the settings when fewer than `need` remain."""
        room = self.input_budget() - self.overhead(role, **blank) - spare
        if cap is not None:
            room = min(room, cap)
        if room < need:
            raise self.no_room(role, what)
        return room

    def no_room(self, role: str, what: str) -> FrameInputError:
        """The input error of a request whose text does not fit the context next to its prompt."""
        s = self.settings
        return FrameInputError(
            "llm.context_tokens",
            f"context_tokens {s.context_tokens} / output budget {budgets.output_budget(s, self.ROLES)} "
            f"(llm.max_output_tokens) leave no room to send {what} to {role}",
        )

    def map(self, fn: Callable[[T], R], jobs: Sequence[T]) -> list[R]:
        """`fn` over `jobs` in order, at most `settings.concurrency` at a time."""
        if len(jobs) <= 1 or self.settings.concurrency <= 1:
            return [fn(j) for j in jobs]
        with ThreadPoolExecutor(max_workers=min(self.settings.concurrency, len(jobs))) as pool:
            return list(pool.map(fn, jobs))

    def ask(
        self,
        role: str,
        schema: type[T],
        *,
        check: Callable[[T], Any] | None = None,
        on_length: str = "grow",
        **variables: Any,
    ):
        """One validated JSON reply of `schema` to the `role` prompt rendered with `variables` (`on_length`:
        tasks.llm.client.LLMClient.complete_json)."""
        return self.client.complete_json(
            role, render(self.prompts[role], **variables), schema, self.ctx, check=check, on_length=on_length
        )

    def ask_messages(
        self,
        role: str,
        messages: list[dict[str, str]],
        schema: type[T],
        *,
        check: Callable[[T], Any] | None = None,
    ):
        return self.client.complete_json(role, messages, schema, self.ctx, check=check)
