"""A PyTorch Lightning script, as a Lightning user writes one: a small classifier trained
with DDPStrategy(process_group_backend=BACKEND) on 2 CPU processes, which Lightning itself
starts (it runs this script again for rank 1).

    python3 lightning_train.py --backend tessera --out result.json

Rank 0 writes the per-step training losses and a digest of the final parameters to --out.
The only line that names tessera is the import (which registers the backend).
"""

import argparse
import hashlib
import json

import torch
import torch.nn as nn
import pytorch_lightning as pl
from pytorch_lightning.strategies import DDPStrategy
from torch.utils.data import DataLoader, TensorDataset

import tessera_torch  # noqa: F401  registers the backend "tessera"


class Classifier(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 8))
        self.losses = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.losses.append(loss.detach().clone())
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


def dataset(samples=512):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(samples, 32, generator=g)
    teacher = torch.randn(32, 8, generator=g)
    return TensorDataset(x, (x @ teacher).argmax(dim=1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="gloo")
    p.add_argument("--out", required=True)
    p.add_argument("--epochs", type=int, default=2)
    args = p.parse_args()
    pl.seed_everything(3, workers=True)
    torch.set_num_threads(1)
    model = Classifier()
    trainer = pl.Trainer(accelerator="cpu", devices=2, num_nodes=1,
                         strategy=DDPStrategy(process_group_backend=args.backend),
                         max_epochs=args.epochs, deterministic=True, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, DataLoader(dataset(), batch_size=32, shuffle=False))
    backend = torch.distributed.get_backend()
    # Every rank's losses, gathered: each rank's own loss is local, so the mean shows both.
    losses = torch.stack(model.losses)
    everyone = [torch.zeros_like(losses) for _ in range(trainer.world_size)]
    torch.distributed.all_gather(everyone, losses)
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
    if trainer.global_rank == 0:
        with open(args.out, "w") as f:
            json.dump({"backend": backend, "world": trainer.world_size,
                       "losses": torch.stack(everyone).mean(0).tolist(), "digest": digest}, f)
    print("rank %d backend %s params sha256 %s" % (trainer.global_rank, backend, digest), flush=True)


if __name__ == "__main__":
    main()
