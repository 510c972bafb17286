"""The ``perfcast`` command line (typer + rich)."""

from __future__ import annotations

import numpy as np
import typer
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from streams.tier_demo import TierScenario, final_fit, simulate_tier, stream_tier

app = typer.Typer(help="perfcast: live queueing-model predictions from coarse monitoring data.",
                  no_args_is_help=True, add_completion=False)


@app.callback()
def main() -> None:
    """perfcast command line."""


def _snapshot_table(scenario: TierScenario, rows: list) -> Table:
    table = Table(title="tier 'db': estimates per window (truth in the header)")
    table.add_column("window", justify="right")
    table.add_column("U", justify="right")
    table.add_column("I (Fig. 2)", justify="right")
    for c, d in zip(scenario.classes, scenario.demands):
        table.add_column(escape(f"D[{c}] ms (true {1000 * d:.1f})"), justify="right")
    for snap in rows[-12:]:
        idc = f"{snap.idc:.1f}" + ("" if snap.idc_flag == "ok" else f" ({snap.idc_flag})")
        cells = [f"{1000 * snap.demands[c]:.2f} ± {1000 * snap.demand_std[c]:.2f}"
                 for c in scenario.classes]
        table.add_row(str(snap.window), f"{snap.utilization:.2f}", idc, *cells)
    return table


@app.command()
def demo(windows: int = typer.Option(2000, help="monitoring windows to simulate"),
         window_s: float = typer.Option(5.0, help="window length T in seconds"),
         idc: float = typer.Option(20.0, help="index of dispersion of the simulated service"),
         seed: int = typer.Option(1, help="random seed")) -> None:
    """Simulate a bursty tier and stream its windows through the estimators (embedded)."""
    console = Console()
    scenario = TierScenario(windows=windows, window_s=window_s, idc=idc)
    rng = np.random.default_rng(seed)
    data, truth = simulate_tier(scenario, rng)
    rows: list = []
    with Live(_snapshot_table(scenario, rows), console=console, refresh_per_second=8) as live:
        for snap in stream_tier(scenario, data, every=max(windows // 20, 1)):
            rows.append(snap)
            live.update(_snapshot_table(scenario, rows))
    last = rows[-1]
    result = final_fit(scenario, data, last.idc)
    fit = result["fit"]
    console.print()
    console.print(f"burst process (before class mix): mean {1000 * truth.mean:.2f} ms, "
                  f"I = {truth.idc:.1f}, p95 = {1000 * truth.quantile(0.95):.2f} ms "
                  "(mixing classes of different cost adds variance, so the tier's I is higher)")
    console.print(f"estimated from windows:            mean {1000 * result['mean_service']:.2f} ms, "
                  f"I = {last.idc:.1f}, p95 (busy-time) = {1000 * (result['p95'] or 0):.2f} ms")
    console.print(f"fitted MAP(2):                     I = {fit.idc:.1f}, p95 = {1000 * fit.p95:.2f} ms, "
                  f"SCV = {fit.scv:.2f}, rho1 = {fit.acf1:.3f}"
                  + ("" if fit.flag is None else f"  [{fit.flag}]"))
    reg = result["regression"]
    console.print("regression demands (paper 002, ms): "
                  + ", ".join(f"{c} {1000 * v:.2f}" for c, v in reg.items()))


if __name__ == "__main__":  # pragma: no cover
    app()
