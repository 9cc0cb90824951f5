#!/usr/bin/python3
"""Draws a training run's loss curve from the csv_monitor files of the GPT trainer (DeepSpeed's
Train_Samples_train_loss.csv, and validation_lm_loss.csv when present) into a PNG.
Usage: plot_loss_curve.py MONITOR_DIR OUT.png [TITLE]   (needs python3-matplotlib)"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    xs, ys = [], []
    with open(path, newline="") as f:
        reader = csv.reader(f)
        next(reader)  # header: step, name
        for row in reader:
            xs.append(int(row[0]))
            ys.append(float(row[1]))
    return xs, ys


def main():
    directory, out = sys.argv[1], sys.argv[2]
    title = sys.argv[3] if len(sys.argv) > 3 else "GPT demo"
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    xs, ys = read(os.path.join(directory, "Train_Samples_train_loss.csv"))
    ax.plot(xs, ys, linewidth=0.8, alpha=0.6, label="train loss (per step)")
    k = 20  # a running mean makes the trend readable
    smooth = [sum(ys[max(0, i - k + 1):i + 1]) / len(ys[max(0, i - k + 1):i + 1]) for i in range(len(ys))]
    ax.plot(xs, smooth, linewidth=1.6, label="train loss (mean of %d steps)" % k)
    valid = os.path.join(directory, "validation_lm_loss.csv")
    if os.path.exists(valid):
        vx, vy = read(valid)
        ax.plot(vx, vy, "o-", linewidth=1.4, label="validation loss")
    ax.set_xlabel("samples")
    ax.set_ylabel("cross-entropy (nats per token)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out)


if __name__ == "__main__":
    main()
