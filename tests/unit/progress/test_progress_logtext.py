"""Progress lines in a log -> Progress: tqdm bars (a carriage-return stream), PyTorch Lightning's TQDM and Rich
bars, Hugging Face Trainer's logs, `Epoch N/M` lines, kubectl's timestamps, torn last lines, hostile text.

The bar lines are tqdm's `format_meter` output (tqdm/std.py: `{desc}: {percentage:3.0f}%|{bar}| n/total
[elapsed<remaining, rate, postfix]`), Lightning's descriptions (`Epoch {current_epoch}`, Rich's
`Epoch {current_epoch}/{max_epochs - 1}` and `elapsed • remaining`) and the Trainer's `str(logs)`."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubectl_tao.progress.logtext import LINE_CHARS, clock_seconds, read_log
from kubectl_tao.progress.model import Progress, progress_cell

LIGHTNING = "Epoch 3:  45%|████▌     | 450/1000 [01:02<01:16,  7.20it/s, v_num=0, train_loss=0.430]"
LIGHTNING_ASCII = "Epoch 3:  45%|####5     | 450/1000 [01:02<01:16,  7.20it/s, v_num=0, train_loss=0.430]"
RICH = ("Epoch 3/9  ━━━━━━━━━━━━━━━━━╸━━━━━━━━━━━━━━━━━━━━━━ 450/1000 0:01:02 • 0:01:16 7.20it/s v_num: 0 "
        "train_loss: 0.430")
HF_START = ("[INFO|trainer.py:2128] 2026-12-06 09:04:07,553 >> ***** Running training *****\n"
            "[INFO|trainer.py:2130] 2026-12-06 09:04:07,553 >>   Num Epochs = 3\n"
            "[INFO|trainer.py:2134] 2026-12-06 09:04:07,553 >>   Total optimization steps = 1,500\n")
HF_LOG = "{'loss': 0.4321, 'grad_norm': 1.8843, 'learning_rate': 4.5e-05, 'epoch': 1.5}"
HF_BAR = " 50%|█████     | 750/1500 [06:15<06:15,  2.00it/s]"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "progress"
HF_EVAL_BAR = " 40%|████      | 20/50 [00:04<00:06,  4.80it/s]"


def test_a_lightning_training_bar_reads_as_the_epoch_and_its_batches() -> None:
    for text in (LIGHTNING, LIGHTNING_ASCII):
        assert read_log(text) == Progress(
            epoch=4, step=450, total_steps=1000, percent=45.0, kpi={"train_loss": 0.43}, source="log",
            epoch_seconds=138, step_seconds=pytest.approx(62 / 450))


def test_a_bar_redrawn_with_carriage_returns_reads_as_its_last_update() -> None:
    stream = "\r".join(f"Epoch 0: {n * 10:3d}%|{'#' * n:<10}| {n}/10 [00:{n:02d}<00:{10 - n:02d},  1.00it/s, "
                       f"v_num=0, train_loss={1 / n:.3f}]" for n in range(1, 8))
    progress = read_log("Sanity Checking: |          | 0/? [00:00<?, ?it/s]\n\r" + stream)
    assert progress is not None
    assert (progress.epoch, progress.step, progress.total_steps, progress.percent) == (1, 7, 10, 70.0)
    assert progress.kpi == {"train_loss": 0.143}


def test_a_rich_bar_knows_the_number_of_epochs_and_the_eta_of_the_run() -> None:
    progress = read_log(RICH)
    assert progress is not None
    assert (progress.epoch, progress.max_epoch, progress.step, progress.total_steps) == (4, 10, 450, 1000)
    # 3 epochs and 45% of the fourth done of 10; 76 s left in this one and 6 more of 138 s
    assert (progress.percent, progress.eta_seconds, progress.epoch_seconds) == (34.5, 76 + 6 * 138, 138)
    assert progress.kpi == {"train_loss": 0.43}
    assert progress_cell(progress) == "epoch 4/10 34%"


def test_validation_and_test_bars_are_not_training_progress() -> None:
    val = "Validation DataLoader 0:  60%|██████    | 6/10 [00:01<00:00,  5.10it/s]"
    test = "Testing DataLoader 0: 100%|██████████| 10/10 [00:02<00:00,  4.90it/s]"
    assert read_log(LIGHTNING + "\n" + val + "\r" + test) == read_log(LIGHTNING)
    assert read_log(val) is None


def test_a_hugging_face_trainer_log_reads_as_steps_of_the_run_with_its_epoch_and_losses() -> None:
    text = HF_START + HF_LOG + "\n\r" + HF_BAR + "\r" + HF_EVAL_BAR + "\n{'eval_loss': 0.3988, 'eval_runtime': 9.1, " \
        "'eval_samples_per_second': 110.2, 'eval_steps_per_second': 5.5, 'epoch': 1.5}\n"
    progress = read_log(text)
    assert progress == Progress(
        epoch=2, max_epoch=3, step=750, total_steps=1500, percent=50.0, eta_seconds=375,
        kpi={"loss": 0.4321, "eval_loss": 0.3988}, source="log", step_seconds=0.5)
    assert progress_cell(progress) == "epoch 2/3 50%"


def test_a_trainer_log_without_a_bar_still_gives_the_epoch() -> None:
    progress = read_log(HF_START + HF_LOG + "\n")
    assert progress is not None and (progress.epoch, progress.max_epoch, progress.percent) == (2, 3, 50.0)


@pytest.mark.parametrize(("text", "epoch", "of"), [
    ("Epoch 3/10 loss 0.51", 3, 10), ("INFO: Epoch [7/90] lr 0.1", 7, 90), ("epoch 2/5", None, None),
    ("Epoch 11/10", None, None), ("Epoch 3/10/2024", None, None),
])
def test_an_epoch_of_epochs_line_is_read(text: str, epoch: int | None, of: int | None) -> None:
    progress = read_log(text)
    assert (progress.epoch, progress.max_epoch) == (epoch, of) if progress else epoch is None


def test_kubectl_timestamps_give_the_time_of_the_last_progress() -> None:
    text = (f"2026-12-06T09:14:58.123456789Z {LIGHTNING}\n"
            "2026-12-06T09:20:00.000000001Z checkpoint saved\n"
            "2026-12-06T11:20:00+02:00 INFO: Epoch [7/90] lr 0.1\n")
    progress = read_log(text)
    assert progress is not None and progress.updated == "2026-12-06T11:20:00+02:00"
    assert read_log(text.split("\n")[0] + "\n" + text.split("\n")[1]).updated == "2026-12-06T09:14:58Z"


def test_a_torn_last_bar_is_passed_over() -> None:
    for cut in range(1, len(LIGHTNING) - 1):
        assert read_log(RICH + "\n\r" + LIGHTNING[:cut]) == read_log(RICH), cut


def test_a_bar_in_terminal_colours_is_read() -> None:
    coloured = "\x1b[2K\x1b[1;32m" + LIGHTNING.replace("450/1000", "\x1b[0m450/1000\x1b[0m") + "\x1b[0m"
    assert read_log(coloured) == read_log(LIGHTNING)


@pytest.mark.parametrize(("text", "seconds"), [("01:02", 62), ("1:01:02", 3662), ("0:01:16", 76), ("?", None),
                                               ("-:--:--", None)])
def test_clocks_read_as_tqdm_and_rich_print_them(text: str, seconds: int | None) -> None:
    assert clock_seconds(text) == seconds


HOSTILE = [
    "9" * 5_000_000,
    "%|" * 1_000_000,
    "Epoch " * 500_000,
    "{'" + "'a': 1, " * 300_000 + "}",
    "\x1b[" * 1_000_000,
    "45%|" + "#" * 2_000_000 + "| 1/2 [00:01<00:01, 1.00it/s]",
    LIGHTNING[:40] * 100_000,
    "\r" * 1_000_000,
]


@pytest.mark.parametrize("hostile", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_text_around_a_bar_leaves_the_bar_read(hostile: str) -> None:
    assert read_log(hostile + "\n" + LIGHTNING + "\n" + hostile) == read_log(LIGHTNING)


def test_a_piece_is_read_on_its_first_characters_only() -> None:
    assert read_log(" " * LINE_CHARS + LIGHTNING) is None
    assert read_log(" " * (LINE_CHARS - len(LIGHTNING)) + LIGHTNING) == read_log(LIGHTNING)


def test_invalid_utf8_around_a_bar_is_read_around() -> None:
    assert read_log(b"\xff\xfe\x80\n" + LIGHTNING.encode() + b"\n\xc3(") == read_log(LIGHTNING)


def test_a_log_without_progress_reads_as_nothing() -> None:
    assert read_log("") is None
    assert read_log("Loading data...\nRank 0 initialized\n45% done\n") is None


def test_a_stream_ending_in_a_validation_bar_reads_the_training_bar_before_it() -> None:
    training = "Epoch 1:  50%|#####     | 5/10 [00:05<00:05,  1.00it/s, v_num=0, train_loss=0.250]"
    validation = "Validation DataLoader 0:  50%|#####     | 1/2 [00:00<00:00,  4.00it/s]"
    progress = read_log("\r" + training.replace("5/10", "4/10") + "\r" + training + "\r" + validation)
    assert progress is not None and (progress.epoch, progress.step, progress.kpi) == (2, 5, {"train_loss": 0.25})


def test_what_follows_the_last_bar_of_a_stream_is_read_in_order() -> None:
    bars = "\r".join(f" {n * 10:2d}%|{'#' * n:<10}| {n * 10}/100 [00:{n:02d}<00:{10 - n:02d},  1.00it/s]"
                     for n in (3, 4))
    line = bars + "\r{'loss': 0.61, 'epoch': 0.3}\r" + "{'loss': 0.52, 'epoch': 0.4}"
    progress = read_log(line + "\n")
    assert progress is not None
    assert (progress.step, progress.total_steps, progress.epoch, progress.kpi) == (40, 100, 1, {"loss": 0.52})


def test_a_real_tqdm_bar_in_lightnings_shape_reads_as_its_last_epoch() -> None:
    text = (FIXTURES / "tqdm-4.70.1-lightning-bar.log").read_bytes()
    progress = read_log(text)
    assert progress is not None
    assert (progress.epoch, progress.step, progress.total_steps, progress.percent) == (2, 20, 20, 100.0)
    assert progress.kpi == {"train_loss": 0.025}
    middle = read_log(text[:text.index(b"Epoch 1:  50%")])
    assert middle is not None and (middle.epoch, middle.step) == (2, 9)


def test_a_real_tqdm_bar_with_trainer_logs_reads_steps_epochs_and_losses_and_skips_the_evaluation_bar() -> None:
    text = (FIXTURES / "tqdm-4.70.1-trainer-bar.log").read_text(encoding="utf-8")
    progress = read_log(text)
    assert progress is not None
    assert (progress.epoch, progress.max_epoch, progress.step, progress.total_steps) == (2, 2, 40, 40)
    assert progress.kpi == {"loss": 0.025, "eval_loss": 0.3988}
    during = read_log(text[:text.index("62%")])
    assert during is not None and (during.step, during.percent, during.epoch) == (20, 50.0, 1)


def test_a_bar_redrawn_within_a_timestamped_line_has_no_time_of_its_own() -> None:
    stamp = "2026-12-06T09:14:58.123456789Z "
    assert read_log(stamp + "\r" + LIGHTNING).updated == "2026-12-06T09:14:58Z"  # type: ignore[union-attr]
    redrawn = stamp + "\r" + LIGHTNING.replace("450/1000", "449/1000") + "\r" + LIGHTNING
    progress = read_log(f"2026-12-06T09:00:00Z Epoch [1/90]\n{redrawn}")
    assert progress is not None and progress.step == 450 and progress.updated is None
    after = read_log(f"{redrawn}\n2026-12-06T09:20:00Z {{'loss': 0.5, 'epoch': 3.5}}\n")
    assert after is not None and after.updated == "2026-12-06T09:20:00Z"
