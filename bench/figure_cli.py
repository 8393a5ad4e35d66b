"""What the figure scripts of bench/ share: one-line errors (exit 2), an argparse parser that reports through
them, the --out check, the plotting libraries' check, a stage's saved inputs read with their shapes checked, and
the verdict on the claims a figure is drawn to show (each one that fails printed as "DOES NOT HOLD", exit 1).
Python 3 standard library only (load_stage_inputs imports NumPy when called)."""

import argparse
import sys
from pathlib import Path


def fail(prog, message, status=2):
    """One line on stderr, prefixed with the script's name; exits with status (2: bad input)."""
    print(f"{prog}: {message}", file=sys.stderr)
    sys.exit(status)


def parser_class(prog):
    """An argparse.ArgumentParser whose errors are fail()'s one line and exit 2."""
    class Parser(argparse.ArgumentParser):
        def error(self, message):
            fail(prog, message)
    return Parser


def checked_png(prog, out):
    """--out as a Path: a .png file in a folder that exists."""
    out = Path(out)
    if out.suffix.lower() != ".png":
        fail(prog, f"--out {out}: expected a .png file")
    if not out.parent.is_dir():
        fail(prog, f"--out {out}: no folder {out.parent}")
    return out


def require_plotting(prog, numpy=True):
    """Exits 2 with one line when Matplotlib (and NumPy, where the script uses it) cannot be imported."""
    try:
        import matplotlib  # noqa: F401
        if numpy:
            import numpy as _  # noqa: F401
    except ImportError as error:
        fail(prog, f"needs {'numpy and ' if numpy else ''}matplotlib ({error})")


def load_stage_inputs(prog, folder):
    """e.npy [N, D], c.npy [V, D] and targets.npy [N] from `folder` (a stage's --save, bench/lm_data.py's output) as
    NumPy arrays; one line and exit 2 on a missing file or disagreeing shapes."""
    import numpy as np
    arrays = {}
    for name in ("e", "c", "targets"):
        path = Path(folder) / f"{name}.npy"
        try:
            arrays[name] = np.load(path)
        except (OSError, ValueError) as error:
            fail(prog, f"{path}: {error}")
    e, c, t = arrays["e"], arrays["c"], arrays["targets"]
    if e.ndim != 2 or c.ndim != 2 or t.ndim != 1 or e.shape[1] != c.shape[1] or t.shape[0] != e.shape[0]:
        fail(prog, f"{folder}: shapes disagree: e {e.shape}, c {c.shape}, targets {t.shape}")
    return e, c, t


def verdict(prog, claims):
    """claims: (holds, what) pairs. Prints each that fails as DOES NOT HOLD; returns the exit status (1 if any)."""
    failed = [what for holds, what in claims if not holds]
    for what in failed:
        print(f"{prog}: DOES NOT HOLD: {what}", file=sys.stderr)
    return 1 if failed else 0


def add_seed_flag(parser, default, what):
    """--seed, the made-up data's seed: an integer of 0 or more (anything else is the parser's one-line error)."""
    def seed(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
        if value < 0:
            raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
        return value
    parser.add_argument("--seed", type=seed, default=default, help=f"{what} (default {default})")


def add_out_flag(parser, default, repo):
    """--out, the PNG to write, defaulting to default (a Path under repo)."""
    parser.add_argument("--out", default=str(default), help=f"the PNG to write (default {default.relative_to(repo)})")


def drawing_area(plt, width, height, inches=10.0):
    """A figure inches wide whose one axes fills it, in drawing units: x from 0 to width, y from 0 at the top to
    height at the bottom, equal scales, no frame."""
    fig = plt.figure(figsize=(inches, inches * height / width))
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def save_png(plt, fig, out, dpi=110, colors="rgba"):
    """Writes fig to out and closes it, with no version stamp, so that the same inputs give the same bytes.
    colors: "rgba" as Matplotlib writes it; "rgb" without the alpha channel (on white, about a tenth smaller);
    "palette" quantized to 256 colours (for flat-coloured diagrams, about a third the size)."""
    if colors == "rgba":
        fig.savefig(out, dpi=dpi, metadata={"Software": None})
    else:
        import io

        from PIL import Image  # Matplotlib's own dependency

        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=dpi, facecolor="white")
        image = Image.open(buffer).convert("RGB")
        (image.quantize(colors=256) if colors == "palette" else image).save(out, optimize=True)
    plt.close(fig)
