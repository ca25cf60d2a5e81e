"""torchvision reference for bench/loader.c: ImageFolder + DataLoader with the same transform
(RandomResizedCrop(224) bilinear, RandomHorizontalFlip, ToTensor, Normalize), workers and batch.

usage: /usr/bin/python3 bench/loader_torch.py DIR WORKERS BATCH EPOCHS
"""
import sys
import time

import torch
from torchvision import datasets, transforms


def main():
    root, workers, batch, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(1)
    tf = transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    ])
    ds = datasets.ImageFolder(root + "/train", transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, drop_last=True,
                                     num_workers=workers, persistent_workers=workers > 0,
                                     prefetch_factor=2)
    images = 0
    checksum = 0.0
    t0 = time.perf_counter()
    for _ in range(epochs):
        for x, _y in dl:
            images += x.shape[0]
            checksum += float(x[0, 0, 0, 0])
    dt = time.perf_counter() - t0
    print("torchvision: %d images in %.2f s = %.1f images/s (workers %d, batch %d)" %
          (images, dt, images / dt, workers, batch))


if __name__ == "__main__":
    main()
