"""Progress read from a program's log: the forms PyTorch programs print without being asked.

- tqdm bars (tqdm/std.py `format_meter`, the default bar format `{l_bar}{bar}{r_bar}`):
  `Epoch 3:  45%|####5     | 450/1000 [01:02<01:16,  7.20it/s, v_num=0, train_loss=0.430]`: the description
  and ": ", the percentage (`{:3.0f}%|`), the bar, `| n/total [elapsed<remaining, rate{, postfix}]`, elapsed and
  remaining as `[H:]MM:SS` (remaining `?` before a rate is known). A bar redrawn in place is a stream of
  updates separated by carriage returns, and the line ends only when the bar closes.
- PyTorch Lightning: TQDMProgressBar's training bar is a tqdm bar described `Epoch {current_epoch}` (0-based)
  with the progress-bar metrics as postfix; RichProgressBar prints `Epoch {current_epoch}/{max_epochs - 1}`,
  the bar, `n/total`, `elapsed • remaining` (as `str(timedelta)`), `N.NNit/s` and `name: value` metrics.
  Its validation, sanity-check and test bars are not training progress and are passed over.
- Hugging Face Trainer: `ProgressCallback.on_log` writes `str(logs)`, a Python dict on its own line
  (`{'loss': 0.43, 'grad_norm': 1.2, 'learning_rate': 4.5e-05, 'epoch': 1.5}`); the training bar is a plain
  tqdm bar over the optimization steps; the start of training logs `  Num Epochs = 3` and
  `  Total optimization steps = 1,000`.
- A line `Epoch N/M` (`Epoch [N/M]`) printed by a program of its own, read as epoch N of M.

A line may carry the timestamp `kubectl logs --timestamps` puts first: the time the container runtime logged
the line's first part (containerd: once the line ended or 16 KiB of it was read), which the text that opens
the line precedes. That time is the Progress's `updated` when the last progress
opened its line. A bar redrawn after a carriage return may have been written long after it: its time is
unknown (None), so neither the ETA countdown nor the stall warning judges it by a time that may be hours old.

The work is linear in the text: lines and carriage-return pieces are cut to LINE_CHARS before any pattern runs,
a cheap test picks the pieces a pattern may match, and a redrawn bar is read from its last update."""

from __future__ import annotations

import math
import re

from kubectl_tao.progress.model import SOURCE_LOG, Progress, percent_of

LINE_CHARS = 4096  # a piece is read on its first LINE_CHARS characters
MAX_METRICS = 32

_TIMESTAMP = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2})T([0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2}) "
)
_TERMINAL = re.compile(r"\x1b\[[0-9;?]{0,32}[ -/]{0,4}[@-~]|\x1b[@-Z\\-_]")
_CLOCK = r"[0-9]{1,6}(?::[0-9]{2}){1,2}"
_NUMBER = r"-?[0-9][0-9.eE+-]{0,31}|nan|-?inf"
TQDM_BAR = re.compile(
    rf"([0-9]{{1,3}})%\|[^|]{{0,400}}\| ?([0-9]{{1,12}})/([0-9]{{1,12}}) \[({_CLOCK})<({_CLOCK}|\?)"
    r"(?:, ?([^\[\]]{0,600}))?\]"
)
LIGHTNING_DESC = re.compile(r"Epoch ([0-9]{1,7})(?:/([0-9]{1,7}))?: {0,3}\Z")
RICH_BAR = re.compile(
    r"Epoch ([0-9]{1,7})/([0-9]{1,7}) {1,40}[^ ]{0,400} ([0-9]{1,12})/([0-9]{1,12}|--) "
    r"([0-9]{1,6}:[0-9]{2}:[0-9]{2}|-:--:--) \u2022 ([0-9]{1,6}:[0-9]{2}:[0-9]{2}|-:--:--)(.{0,600})"
)
PLAIN_EPOCH = re.compile(r"(?:^|[\s|:\]-])Epoch:? ?\[?([0-9]{1,7}) ?/ ?([0-9]{1,7})\]?(?![0-9/])")
HF_ITEM = re.compile(rf"'([A-Za-z_][\w./-]{{0,63}})': ({_NUMBER})(?=[,}}])")
HF_EPOCHS = re.compile(r"Num Epochs = ([0-9][0-9,]{0,12})(?![0-9,])")
HF_STEPS = re.compile(r"Total optimization steps = ([0-9][0-9,]{0,15})(?![0-9,])")
POSTFIX_ITEM = re.compile(rf"([A-Za-z_][\w./-]{{0,63}})=({_NUMBER})(?![\w.])")
RICH_ITEM = re.compile(rf"([A-Za-z_][\w./-]{{0,63}}): ({_NUMBER})(?![\w.])")
_NOT_TRAINING = ("Validation", "Sanity Checking", "Testing", "Predicting")
_HF_NOT_METRICS = {"learning_rate", "grad_norm", "epoch", "step", "total_flos"}
_LIMIT = 10**9


def clock_seconds(text: str) -> int | None:
    """Seconds of a `[H:]MM:SS` or `H:MM:SS` clock; None for `?` and `-:--:--`."""
    if not text or not text[0].isdigit():
        return None
    total = 0
    for part in text.split(":"):
        total = total * 60 + int(part)
    return total


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


class _Reader:
    """What the pieces read so far show; `progress()` composes them."""

    def __init__(self) -> None:
        self.stamp: str | None = None  # the current line's time
        self.first = True  # whether the current piece is the first text of its line (written at its time)
        self.updated: str | None = None
        self.bar: tuple[int, int, int, int | None] | None = None  # n, total, elapsed, remaining
        self.bar_epoch: tuple[int, int | None] | None = None  # Lightning's 0-based epoch and last epoch index
        self.plain_epoch: tuple[int, int] | None = None
        self.hf_epoch: float | None = None
        self.hf_epochs: int | None = None
        self.hf_steps: int | None = None
        self.kpi: dict[str, float] = {}
        self.bars = 0  # training bars read


    def seen(self) -> None:
        # A redraw after a carriage return may be written long after its line's timestamp: its time is unknown.
        self.updated = self.stamp if self.first else None

    def metrics(self, items: list[tuple[str, str]], skip: frozenset[str] | set[str] = frozenset()) -> None:
        for name, text in items:
            value = _number(text)
            if value is None or name in skip or name.endswith(("_runtime", "_per_second")) or name == "v_num":
                continue
            if name in self.kpi or len(self.kpi) < MAX_METRICS:
                self.kpi[name] = value

    def last_bar(self, piece: str) -> bool:
        """Whether PIECE is a training bar (then read): a bar redrawn in place is read on its last update."""
        if "%|" not in piece and "Epoch" not in piece:
            return False
        if "\x1b" in piece:
            piece = _TERMINAL.sub("", piece)
        before = self.bars
        if "%|" in piece and self.tqdm(piece):
            return self.bars != before
        return "Epoch" in piece and self.rich_or_plain(piece, plain=False) and self.bars != before

    def piece(self, piece: str) -> None:
        if "\x1b" in piece:
            piece = _TERMINAL.sub("", piece)
        if "%|" in piece and self.tqdm(piece):
            return
        if "Epoch" in piece and self.rich_or_plain(piece):
            return
        stripped = piece.strip()
        if stripped.startswith("{'") and stripped.endswith("}"):
            items = HF_ITEM.findall(stripped)
            epoch = next((_number(v) for k, v in items if k == "epoch"), None)
            if epoch is not None and 0 <= epoch < _LIMIT:
                self.hf_epoch = epoch
            if items:
                self.metrics(items, _HF_NOT_METRICS)
                self.seen()
            return
        if "Num Epochs =" in piece and (found := HF_EPOCHS.search(piece)):
            self.hf_epochs = int(found.group(1).replace(",", "")) or None
        elif "Total optimization steps =" in piece and (found := HF_STEPS.search(piece)):
            self.hf_steps = int(found.group(1).replace(",", "")) or None

    def tqdm(self, piece: str) -> bool:
        found = TQDM_BAR.search(piece)
        if found is None:
            return False
        before = piece[max(0, found.start() - 80):found.start()]
        if any(word in before for word in _NOT_TRAINING):
            return True
        n, total = int(found.group(2)), int(found.group(3))
        desc = LIGHTNING_DESC.search(before)
        if desc is None and self.hf_steps and total != self.hf_steps:
            return True  # an evaluation bar beside the Trainer's bar over the optimization steps
        if total <= 0 or n > total:
            return True
        self.bar = (n, total, clock_seconds(found.group(4)) or 0, clock_seconds(found.group(5)))
        self.bar_epoch = (int(desc.group(1)), int(desc.group(2)) if desc.group(2) else None) if desc else None
        self.bars += 1
        if found.group(6):
            self.metrics(POSTFIX_ITEM.findall(found.group(6)))
        self.seen()
        return True

    def rich_or_plain(self, piece: str, plain: bool = True) -> bool:
        found = RICH_BAR.search(piece)
        if found is not None and found.group(4) != "--":
            n, total = int(found.group(3)), int(found.group(4))
            if total > 0 and n <= total:
                elapsed = clock_seconds(found.group(5)) or 0
                self.bar = (n, total, elapsed, clock_seconds(found.group(6)))
                self.bar_epoch = (int(found.group(1)), int(found.group(2)))
                self.bars += 1
                self.metrics(RICH_ITEM.findall(found.group(7)))
                self.seen()
                return True
        plain = PLAIN_EPOCH.search(piece, 0, 400) if plain else None
        if plain is not None:
            epoch, of = int(plain.group(1)), int(plain.group(2))
            if of > 0 and epoch <= of:
                self.plain_epoch = (epoch, of)
                self.seen()
                return True
        return False

    def progress(self) -> Progress | None:
        kpi = dict(self.kpi) or None
        base = Progress(source=SOURCE_LOG, kpi=kpi, updated=self.updated)
        if self.bar is not None:
            n, total, elapsed, remaining = self.bar
            step_seconds = elapsed / n if n and elapsed else None
            if self.bar_epoch is not None:  # Lightning: the bar is one epoch's batches
                current, last = self.bar_epoch
                epochs = last + 1 if last is not None else None
                span = elapsed + remaining if remaining is not None and n else None
                eta = None
                if epochs is not None and remaining is not None:
                    eta = remaining + max(0, epochs - current - 1) * (span or 0)
                return base.replaced(
                    epoch=current + 1, max_epoch=epochs, step=n, total_steps=total,
                    percent=percent_of(current + n / total, epochs) if epochs else percent_of(n, total),
                    eta_seconds=eta, epoch_seconds=span or None, step_seconds=step_seconds)
            epoch = math.ceil(self.hf_epoch) if self.hf_epoch else None
            return base.replaced(
                epoch=epoch, max_epoch=self.hf_epochs if epoch is not None else None, step=n, total_steps=total,
                percent=percent_of(n, total), eta_seconds=remaining, step_seconds=step_seconds)
        if self.plain_epoch is not None:
            epoch, of = self.plain_epoch
            return base.replaced(epoch=epoch, max_epoch=of, percent=percent_of(epoch, of))
        if self.hf_epoch is not None:
            epoch = math.ceil(self.hf_epoch) or None
            return base.replaced(
                epoch=epoch, max_epoch=self.hf_epochs,
                percent=percent_of(self.hf_epoch, self.hf_epochs) if self.hf_epochs else None)
        return base if kpi else None


def read_log(text: str | bytes) -> Progress | None:
    """The last progress a log shows (its tail, as `kubectl logs --tail` / `--timestamps` prints it); None when
    it shows none."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    reader = _Reader()
    for line in text.split("\n"):
        stamp = _TIMESTAMP.match(line, 0, 64) if line[:1].isdigit() else None
        if stamp is not None:
            day, clock, zone = stamp.groups()
            reader.stamp = f"{day}T{clock}Z" if zone in ("Z", "+00:00") else f"{day}T{clock}{zone}"
            line = line[stamp.end():]
        else:
            reader.stamp = None
        reader.first = True
        if "\r" not in line:
            reader.piece(line[:LINE_CHARS])
            continue
        # a carriage-return stream: its last training bar, then what came after it, in order
        pieces = line.split("\r")
        opening = next((i for i, piece in enumerate(pieces) if piece), 0)
        last = -1
        for i in range(len(pieces) - 1, -1, -1):
            reader.first = i == opening
            if reader.last_bar(pieces[i][:LINE_CHARS]):
                last = i
                break
        for i in range(last + 1, len(pieces)):
            if pieces[i]:
                reader.first = i == opening
                reader.piece(pieces[i][:LINE_CHARS])
    return reader.progress()
