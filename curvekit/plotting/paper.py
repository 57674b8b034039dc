"""The paper's 24 figures as data (their list and captions: ``docs/figures.md``).

Each entry is a :class:`~curvekit.plotting.spec.Figure`: the same workloads, goals, trial
counts, normalizations, limits and labels as the spec. Rendering is
:func:`curvekit.plotting.render.figure`.

>>> FIGURES[1].size_px, len(FIGURES[1].panels)
((648, 567), 9)
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from curvekit.plotting.spec import AP, CE, CLS, PAPER_TRIALS, Curve, Figure, Panel
from curvekit.selection import SCATTER_STATUSES, Selection

__all__ = ["FIGURE1_PANELS", "FIGURES", "FIGURES_2_PANELS", "LM1B_EPOCH", "PARTS",
           "looser_goals"]

LM1B_EPOCH = 30_301_028
"""Examples in one LM1B epoch (N_train), the budget of Figures 9(a) and 11."""
_LM1B_BASE = "lm1b/transformer_base/nesterov_momentum"

# (title, workload, metric, goal, maximize, N) of Figure 1's nine panels
FIGURE1_PANELS: tuple[tuple[str, str, str, float, bool, int], ...] = (
    ("Simple CNN on MNIST", "mnist/simple_cnn_base/nesterov_momentum", CLS, 0.01, False, 100),
    ("Simple CNN on Fashion MNIST", "fashion_mnist/simple_cnn_base/nesterov_momentum", CLS,
     0.1, False, 100),
    ("ResNet-8 on CIFAR-10", "cifar_10/resnet_8/nesterov_momentum", CLS, 0.3, False, 100),
    ("ResNet-50 on ImageNet", "imagenet/resnet_50/nesterov_momentum", CLS, 0.25, False, 100),
    ("ResNet-50 on Open Images", "open_images_v4/resnet_50/nesterov_momentum", AP, 0.31, True,
     100),
    ("Transformer on LM1B", "lm1b/transformer_base/nesterov_momentum", CE, 3.9, False, 100),
    ("Transformer on Common Crawl", "common_crawl/transformer_base/nesterov_momentum", CE, 3.9,
     False, 50),
    ("VGG-11 on ImageNet", "imagenet/vgg_11/nesterov_momentum", CLS, 0.35, False, 100),
    ("LSTM on LM1B", "lm1b/lstm/nesterov_momentum", CE, 3.9, False, 50),
)


def _figure1() -> Figure:
    panels = tuple(
        Panel(title, "steps", (Curve(Selection(w, metric, goal, maximize, n), title),),
              scaling_label=title,
              ylim=(2.0**13, 2.0**21) if i == 8 else None)
        for i, (title, w, metric, goal, maximize, n) in enumerate(FIGURE1_PANELS))
    return Figure(1, "Steps to result vs batch size, nine workloads", 3, 3, panels)


_METRIC_NAMES = {CLS: "classification error", CE: "cross entropy", AP: "average precision"}


# (title, workload, metric, goals) of Figure 2's three panels
FIGURES_2_PANELS: tuple[tuple[str, str, str, tuple[float, ...]], ...] = (
    ("Simple CNN on MNIST", "mnist/simple_cnn_base/nesterov_momentum", CLS,
     (0.008, 0.01, 0.012, 0.014, 0.016)),
    ("Transformer on LM1B", "lm1b/transformer_base/nesterov_momentum", CE,
     (3.8, 3.85, 3.9, 3.95, 4.0, 4.05)),
    ("ResNet-50 on ImageNet", "imagenet/resnet_50/nesterov_momentum", CLS,
     (0.25, 0.27, 0.29, 0.31)),
)


def _figure2() -> Figure:
    spec = FIGURES_2_PANELS
    panels = tuple(
        Panel(title, "steps", tuple(
            Curve(Selection(w, metric, g, trials=PAPER_TRIALS),
                  f"goal {_METRIC_NAMES[metric]} = {g!r}") for g in goals))
        for title, w, metric, goals in spec)
    return Figure(2, "Steps to result for several goals", 1, 3, panels)


def _figure8() -> Figure:
    panels = []
    for title, w, metric, goal, maximize, n in FIGURE1_PANELS:
        if w.startswith("fashion_mnist/"):
            goal = 0.3  # the spec: Figure 8 uses 0.3 for Fashion MNIST
        panels.append(Panel(title, "metaparameter",
                            (Curve(Selection(w, metric, goal, maximize, n),
                                   "Optimal Effective Learning Rate"),),
                            y="effective_learning_rate",
                            y_title="Learning Rate / (1 - Momentum)", heuristics=True))
    return Figure(8, "Optimal effective learning rate", 3, 3, tuple(panels))


def _figure24() -> Figure:
    titles = {CLS: "Best Validation Error", CE: "Best Validation Cross Entropy",
              AP: "Best Validation Average Precision"}
    panels = tuple(
        Panel(title, "best", (Curve(Selection(w, metric, goal, maximize), title),),
              y_title=titles[metric], goal_line=True, goal_label="Figure 1 goal",
              legend_size=6)
        for title, w, metric, goal, maximize, _ in FIGURE1_PANELS)
    return Figure(24, "Best validation metric vs batch size", 3, 3, panels)


def _normalized(number: int, title: str, rows: int, cols: int,
                panels: list[tuple[str, list[tuple[str, str, str, float, bool, int]], str, int,
                                   tuple[float, float] | None]]) -> Figure:
    """A figure of normalized steps-to-result panels: (title, curves, scaling label, M, ylim)."""
    return Figure(number, title, rows, cols, tuple(
        Panel(t, "steps", tuple(Curve(Selection(w, m, g, mx, n), label)
                                for label, w, m, g, mx, n in curves),
              scaling_label=scaling, normalize_at=at, ylim=ylim)
        for t, curves, scaling, at, ylim in panels))


def _figure3() -> Figure:
    fc = [("FC-1024", "mnist/fc_1024/sgd"), ("FC-128-128-128", "mnist/fc_128_128_128/sgd"),
          ("FC-256-256-256", "mnist/fc_256_256_256/sgd"),
          ("FC-512-512-512", "mnist/fc_512_512_512/sgd"),
          ("FC-1024-1024-1024", "mnist/fc_1024_1024_1024/sgd"),
          ("FC-2048-2048-2048", "mnist/fc_2048_2048_2048/sgd")]
    lm = "lm1b/transformer_{}/nesterov_momentum"
    return _normalized(3, "Model comparisons, normalized", 3, 2, [
        ("Fully Connected vs Simple CNN on MNIST",
         [("FC-1024-1024-1024", "mnist/fc_1024_1024_1024/sgd", CLS, 0.03, False, 100),
          ("Simple CNN", "mnist/simple_cnn_base/sgd", CLS, 0.03, False, 100)],
         "FC-1024-1024-1024", 1, (2.0**-11, 2.0)),
        ("ResNet-50 vs VGG-11 on ImageNet",
         [("ResNet-50", "imagenet/resnet_50/nesterov_momentum", CLS, 0.35, False, 100),
          ("VGG-11", "imagenet/vgg_11/nesterov_momentum", CLS, 0.35, False, 100)],
         "ResNet-50", 64, (2.0**-9, 2.0)),
        ("Transformer vs LSTM on LM1B",
         [("Transformer", lm.format("base"), CE, 3.9, False, 100),
          ("LSTM", "lm1b/lstm/nesterov_momentum", CE, 3.9, False, 50)],
         "Transformer", 16, (2.0**-8, 2.0)),
        ("Fully Connected sizes on MNIST",
         [(label, w, CLS, 0.03, False, 100) for label, w in fc], "FC-1024", 2, (2.0**-11, 2.0)),
        ("Simple CNN sizes on MNIST",
         [(label, f"mnist/simple_cnn_{size}/sgd", CLS, 0.01, False, 100) for label, size in (
             ("Simple CNN", "base"), ("Simple CNN Narrow", "narrow"),
             ("Simple CNN Wide", "wide"))], "Simple CNN", 2, (2.0**-11, 2.0)),
        ("Transformer sizes on LM1B",
         [(label, lm.format(size), CE, 4.2, False, 100) for label, size in (
             ("Wide", "wide"), ("Base", "base"), ("Shallow", "shallow"),
             ("Narrow and Shallow", "narrow_and_shallow"))], "Wide", 16, (2.0**-9, 2.0)),
    ])


def _figure4() -> Figure:
    names = {"sgd": "SGD", "momentum": "Momentum", "nesterov_momentum": "Nesterov Momentum"}

    def curves(base: str, metric: str, goal: float, opts: tuple[str, ...],
               n: dict[str, int] | None = None) -> tuple[Curve, ...]:
        return tuple(Curve(Selection(f"{base}/{o}", metric, goal,
                                     trials=(n or {}).get(o, PAPER_TRIALS)), names[o])
                     for o in opts)

    return Figure(4, "SGD vs Momentum vs Nesterov Momentum", 1, 3, (
        Panel("Simple CNN on MNIST", "steps", curves(
            "mnist/simple_cnn_base", CLS, 0.01, ("sgd", "momentum", "nesterov_momentum")),
              scaling_label="Nesterov Momentum", ylim=(2.0**4, 2.0**17)),
        Panel("Transformer Shallow on LM1B", "steps", curves(
            "lm1b/transformer_shallow", CE, 3.9, ("sgd", "momentum", "nesterov_momentum"),
            {"sgd": 50}), scaling_label="Nesterov Momentum", ylim=(2.0**12, 2.0**22)),
        Panel("ResNet-8 on CIFAR-10", "steps", curves(
            "cifar_10/resnet_8", CLS, 0.3, ("sgd", "nesterov_momentum")),
              scaling_label="Nesterov Momentum", ylim=(2.0**7, 2.0**18)),
    ))


def _figure5() -> Figure:
    return _normalized(5, "One model, different data sets", 1, 3, [
        ("Simple CNN",
         [("MNIST, 0.01", "mnist/simple_cnn_base/nesterov_momentum", CLS, 0.01, False, 100),
          ("Fashion MNIST, 0.1", "fashion_mnist/simple_cnn_base/nesterov_momentum", CLS, 0.1,
           False, 100)], "MNIST, 0.01", 2, None),
        ("ResNet-50",
         [("ImageNet, 0.25", "imagenet/resnet_50/nesterov_momentum", CLS, 0.25, False, 100),
          ("Open Images, 0.31", "open_images_v4/resnet_50/nesterov_momentum", AP, 0.31, True,
           100)], "ImageNet, 0.25", 128, None),
        ("Transformer",
         [("LM1B, 3.9", "lm1b/transformer_base/nesterov_momentum", CE, 3.9, False, 100),
          ("Common Crawl, 3.9", "common_crawl/transformer_base/nesterov_momentum", CE, 3.9,
           False, 50)], "LM1B, 3.9", 32, None),
    ])


def _figure6() -> Figure:
    cnn = "mnist_subsets/mnist_{}/simple_cnn_base/nesterov_momentum"
    half = "imagenet_subsets/imagenet_half_{}/resnet_50/nesterov_momentum"
    return Figure(6, "Data-set size", 1, 2, tuple(
        Panel(t, "steps", tuple(Curve(Selection(w, CLS, g, trials=PAPER_TRIALS), label)
                                for label, w, g in curves),
              scaling_label=curves[0][0], normalize_at=at, ylim=(2.0**-10, 2.0))
        for t, curves, at in (
            ("Simple CNN on MNIST subsets", [
                (f"{share} of images, 0.02", cnn.format(n), 0.02) for share, n in (
                    ("100%", 55000), ("50%", 27500), ("25%", 13750), ("12.5%", 6875))], 2),
            ("ResNet-50 on ImageNet subsets", [
                ("100% of images, 0.25", "imagenet/resnet_50/nesterov_momentum", 0.25),
                ("50% of images, 0.3", half.format("images"), 0.3),
                ("50% of classes, 0.3", half.format("classes"), 0.3)], 64))))


def _optimal(number: int, title: str, column: str, label: str, y_title: str,
             heuristics: bool, panels: tuple[tuple[str, str, str, float, bool, int], ...],
             rows: int, cols: int) -> Figure:
    """Optimal-metaparameter panels; ``one_minus_momentum`` is drawn on a log10 axis."""
    return Figure(number, title, rows, cols, tuple(
        Panel(t, "metaparameter", (Curve(Selection(
            w, m, 0.3 if w.startswith("fashion_mnist/") and number in (8, 13, 14) else g,
            mx, n), label),),
              y=column, y_title=y_title, heuristics=heuristics,
              y_base=10 if column == "one_minus_momentum" else 2)
        for t, w, m, g, mx, n in panels))


_TRANSFORMERS = tuple(
    (label, f"lm1b/transformer_{size}/nesterov_momentum", CE, 4.2, False, 100)
    for label, size in (("Wide", "wide"), ("Base", "base"), ("Shallow", "shallow"),
                        ("Narrow and Shallow", "narrow_and_shallow")))


_PROTOCOL = (("Simple CNN on MNIST", "mnist/simple_cnn_base/nesterov_momentum", CLS, 0.01),
             ("Transformer on LM1B", _LM1B_BASE, CE, 3.9),
             ("ResNet-50 on ImageNet", "imagenet/resnet_50/nesterov_momentum", CLS, 0.25))


def _figure17() -> Figure:
    return Figure(17, "Protocol check: number of trials", 1, 3, tuple(
        Panel(t, "steps", tuple(Curve(Selection(w, m, g, trials=n), f"first {n} trials")
                                for n in (10, 20, 50, 100)), scaling_label="first 100 trials")
        for t, w, m, g in _PROTOCOL))


def _figure7() -> Figure:
    w = "imagenet/resnet_50/nesterov_momentum"
    smoothing = (0.0, 0.01, 0.1)
    return Figure(7, "Label smoothing, ResNet-50 on ImageNet", 1, 2, (
        Panel("Best Validation Error Per Batch Size", "best", tuple(
            Curve(Selection(w, CLS, trials=PAPER_TRIALS, subset=("label_smoothing", v)),
                  f"Label Smoothing = {v:.2f}")
            for v in smoothing), y_title="Validation Error", legend="top-left",
              legend_size=10),
        Panel("Steps to Reach 0.25 Validation Error", "steps", tuple(
            Curve(Selection(w, CLS, 0.25, trials=PAPER_TRIALS,
                            subset=("label_smoothing", v)), f"Label Smoothing = {v:.2f}")
            for v in smoothing), scaling_label="Label Smoothing = 0.10", legend_size=10),
    ))


def _scatter(number: int, title: str, rows: int, cols: int,
             panels: tuple[tuple[str, str, int], ...], *, metric: str, goal: float,
             maximize: bool = False, step_budget: float | None = None,
             example_budget: float | None = None, lims: tuple[float, float] | None = None,
             ylim: tuple[float, float] | None = None, legend_size: float = 8,
             part: str = "") -> Figure:
    """LR–momentum scatters: (panel title, workload, batch size) per panel; all trials."""
    return Figure(number, title, rows, cols, tuple(
        Panel(t, "scatter", (Curve(Selection(w, metric, goal, maximize, None, step_budget,
                                             example_budget, SCATTER_STATUSES), t,
                                   batch_size=bs),),
              xlim=lims, ylim=ylim or lims, legend="bottom-right", legend_size=legend_size)
        for t, w, bs in panels), shared_limits=lims is None, part=part)


def _figure11() -> Figure:
    mnist = (5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
    mnist_epochs = (10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
    lm_steps = (10, 20, 50, 100, 200, 500, 1000)
    lm_epochs = (0.2, 0.5, 1, 2, 5, 10, 20)
    rows = (
        ("Simple CNN on MNIST", "solution_quality/mnist/simple_cnn_base/nesterov_momentum",
         55_000, CLS, "Best Validation Error", mnist, mnist_epochs, (2**-0.5, 2.0**16),
         (0.0, 0.04)),
        ("Simple CNN on Fashion MNIST",
         "solution_quality/fashion_mnist/simple_cnn_base/nesterov_momentum", 55_000, CLS,
         "Best Validation Error", mnist, mnist_epochs, (2**-0.5, 2.0**16), (0.05, 0.2)),
        ("Transformer (narrow and shallow) on LM1B",
         "lm1b/transformer_narrow_and_shallow/nesterov_momentum", LM1B_EPOCH, CE,
         "Best Validation Cross Entropy", lm_steps, lm_epochs, (2**3.5, 2**15.5), (4.0, 5.5)),
        ("Transformer (base) on LM1B", _LM1B_BASE, LM1B_EPOCH, CE,
         "Best Validation Cross Entropy", lm_steps, lm_epochs, (2**3.5, 2**15.5), (3.5, 5.5)),
    )
    panels: list[Panel] = []
    for title, w, n_train, metric, y_title, steps, epochs, xlim, ylim in rows:
        panels.append(Panel(title, "best", tuple(
            Curve(Selection(w, metric, step_budget=k * 1000.0), f"{k}k steps", eligible=True)
            for k in steps), xlim=xlim, ylim=ylim, y_title=y_title, legend_size=9))
        panels.append(Panel(title, "best", tuple(
            Curve(Selection(w, metric, example_budget=e * n_train), f"{e!r} epochs",
                  eligible=True) for e in epochs), xlim=xlim, ylim=ylim, y_title=y_title,
                            legend_size=9))
    return Figure(11, "Best validation metric, step vs epoch budgets", 4, 2, tuple(panels),
                  aspect=4 / 3)


def _figure9() -> Figure:
    """The paper's Figure 9 in two parts, the notebook's "Figure 9a" above "Figure 9b"."""
    lims, ylim = (10**-4.5, 10**-0.5), (1e-6, 10.0)
    epoch = _scatter(9, "Fixed epoch budget: one LM1B epoch, 30,301,028 examples", 2, 3,
                     tuple((f"Batch Size {b}", _LM1B_BASE, b)
                           for b in (128, 256, 512, 1024, 2048, 4096)),
                     metric=CE, goal=3.9, example_budget=float(LM1B_EPOCH), lims=lims,
                     ylim=ylim, part="a")
    steps = _scatter(9, "Fixed step budget: 25,000 steps", 2, 3,
                     tuple((f"Batch Size {b}", _LM1B_BASE, b)
                           for b in (512, 1024, 2048, 4096, 8192, 16384)),
                     metric=CE, goal=3.9, step_budget=25_000.0, lims=lims, ylim=ylim,
                     part="b")
    return Figure(9, "LR-momentum scatter, Transformer on LM1B", epoch.rows + steps.rows, 3,
                  epoch.panels + steps.panels, parts=(epoch, steps))


def looser_goals(goal: float, maximize: bool) -> tuple[float, ...]:
    """Figure 12's goals: the Figure 1 goal and two looser ones, ×1.25 and ×1.5 (×0.9 and
    ×0.8 for a maximized metric), each rounded to 2 significant figures (half up) in
    decimal arithmetic, so that float noise cannot add a digit.

    >>> looser_goals(0.35, False), looser_goals(0.31, True)
    ((0.35, 0.44, 0.53), (0.31, 0.28, 0.25))
    """
    factors = ("0.9", "0.8") if maximize else ("1.25", "1.5")
    out = [goal]
    for factor in factors:
        d = Decimal(repr(goal)) * Decimal(factor)
        quantum = Decimal(1).scaleb(d.adjusted() - 1)
        out.append(float(d.quantize(quantum, rounding=ROUND_HALF_UP)))
    return tuple(out)


def _figure12() -> Figure:
    """Several goals for the six Figure 1 workloads that Figure 2 does not show."""
    shown = {p[1] for p in FIGURES_2_PANELS}
    panels = []
    for title, w, metric, goal, maximize, n in FIGURE1_PANELS:
        if w in shown:
            continue
        curves = tuple(Curve(Selection(w, metric, g, maximize, n), f"goal {g!r}")
                       for g in looser_goals(goal, maximize))
        # the curves fall from the top left: the top-right corner keeps the legend off them
        panels.append(Panel(title, "steps", curves, scaling_label=curves[0].label,
                            legend="top-right"))
    return Figure(12, "Steps to result for several goals, six more workloads", 2, 3,
                  tuple(panels))


def _figure15() -> Figure:
    train = {CLS: "train/classification_error", CE: "train/cross_entropy_error",
             AP: "train/average_precision"}
    return Figure(15, "Steps to result on training error", 3, 3, tuple(
        Panel(f"{title} (train)", "steps", (Curve(Selection(w, train[metric], goal, maximize, n),
                                                  title, fallback_metric=metric),),
              scaling_label=title)
        for title, w, metric, goal, maximize, n in FIGURE1_PANELS))


def _figure16() -> Figure:
    def fc(sizes: tuple[str, ...]) -> tuple[Curve, ...]:
        return tuple(Curve(Selection(f"mnist/fc_{s}/sgd", CLS, 0.03, trials=PAPER_TRIALS),
                           "FC-" + s.replace("_", "-")) for s in sizes)

    return Figure(16, "Fully connected depth and width on MNIST (SGD)", 1, 2, (
        Panel("Fully Connected depth on MNIST", "steps",
              fc(("1024", "1024_1024", "1024_1024_1024")), scaling_label="FC-1024",
              normalize_at="common", ylim=(2.0**-11, 2.0)),
        Panel("Fully Connected width on MNIST", "steps",
              fc(tuple("_".join([str(n)] * 3) for n in (64, 128, 256, 512, 1024, 2048))),
              scaling_label="FC-64-64-64", normalize_at=2, ylim=(2.0**-11, 2.0)),
    ))


def _figure18() -> Figure:
    return Figure(18, "Protocol check: search-space edges", 1, 3, tuple(
        Panel(t, "search_space",
              (Curve(Selection(w, m, g, trials=PAPER_TRIALS), "Optimal Learning Rate"),),
              y_title="Learning Rate")
        for t, w, m, g in _PROTOCOL))


def _figure23() -> Figure:
    """Every workload at its paper goal (resolved at render time; None means "the paper's")."""
    from curvekit.release.manifest import load_manifest

    names = [w["name"] for w in load_manifest("batch_science").workloads]
    return Figure(23, "Steps to result for every workload", 7, 5, tuple(
        Panel("{workload}, goal {goal}", "steps",
              (Curve(Selection(name, CLS, trials=PAPER_TRIALS), name),),
              scaling_label=name) for name in names), width_in=15.0, outer_axis_titles=True)


FIGURES: dict[int, Figure] = {f.number: f for f in (
    _figure1(), _figure2(), _figure3(), _figure4(), _figure5(), _figure6(), _figure7(),
    _figure8(),
    _figure9(),
    _scatter(10, "LR-momentum scatter, four Transformer sizes", 2, 2, tuple(
        (label, w, 1024) for label, w, *_ in _TRANSFORMERS), metric=CE, goal=4.2,
        step_budget=50_000.0, lims=(1e-4, 1e-1)),
    _figure11(), _figure12(),
    _optimal(13, "Optimal learning rate", "learning_rate", "Optimal Learning Rate",
             "Learning Rate", True, FIGURE1_PANELS, 3, 3),
    _optimal(14, "Optimal momentum", "one_minus_momentum", "1 − Optimal Momentum",
             "1 − Momentum", False, FIGURE1_PANELS, 3, 3),
    _figure15(), _figure16(), _figure17(), _figure18(),
    _scatter(19, "LR-momentum scatter, ResNet-50 on ImageNet", 2, 2, tuple(
        (f"Batch Size {b}", "imagenet/resnet_50/nesterov_momentum", b)
        for b in (256, 1024, 4096, 16384)), metric=CLS, goal=0.25),
    _scatter(20, "LR-momentum scatter, ResNet-50 on Open Images", 2, 2, tuple(
        (f"Batch Size {b}", "open_images_v4/resnet_50/nesterov_momentum", b)
        for b in (256, 1024, 4096, 16384)), metric=AP, goal=0.31, maximize=True),
    _optimal(21, "Optimal learning rate, four Transformer sizes", "learning_rate",
             "Optimal Learning Rate", "Learning Rate", True, _TRANSFORMERS, 2, 2),
    _optimal(22, "Optimal momentum, four Transformer sizes", "one_minus_momentum",
             "1 − Optimal Momentum", "1 − Momentum", False, _TRANSFORMERS, 2, 2),
    _figure23(), _figure24())}

PARTS: dict[str, Figure] = {part.name: part for f in FIGURES.values() for part in f.parts}
"""The figures drawn one part at a time, by name: ``9a`` and ``9b``."""
