"""A 2D U-Net for segmentation, as Ronneberger, Fischer and Brox describe it.

O. Ronneberger, P. Fischer, T. Brox, "U-Net: Convolutional Networks for Biomedical Image
Segmentation", MICCAI 2015, arXiv:1505.04597, Sec. 2 and Fig. 1: a contracting path of four
levels, each two 3x3 convolutions with ReLU then a 2x2 max pool with stride 2 (64, 128, 256, 512
channels, doubling per level), a bottom of two 3x3 convolutions at 1024 channels, and an expansive
path of four levels, each a 2x2 up-convolution halving the channels, concatenation with the
contracting path's features of that level, and two 3x3 convolutions with ReLU; a final 1x1
convolution maps 64 channels to the classes (2 in the paper).

Two common departures, stated: the 3x3 convolutions are padded (padding 1), so the output is the
input's size and no cropping is needed (the paper's are unpadded: 572 in, 388 out), and each is
followed by BatchNorm (which postdates the paper and which nearly every U-Net trained today has),
so the convolutions before BatchNorm carry no bias. timm and torchvision have no U-Net.
"""

from __future__ import annotations

import torch
from torch import nn

WIDTHS = (64, 128, 256, 512, 1024)


class DoubleConv(nn.Sequential):
    """Two 3x3 convolutions, each with BatchNorm and ReLU (the paper's unit, padded)."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__(
            nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )


class Up(nn.Module):
    """2x2 up-convolution halving the channels, concatenation with the skip, two convolutions."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.up = nn.ConvTranspose2d(in_channels, out_channels, 2, stride=2)
        self.conv = DoubleConv(2 * out_channels, out_channels)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        return self.conv(torch.cat([skip, self.up(x)], dim=1))


class UNet(nn.Module):
    """The U-Net of arXiv:1505.04597 Fig. 1 (padded, with BatchNorm). Input sides must be
    multiples of 16 (four 2x2 poolings)."""

    stride = 16

    def __init__(self, in_channels: int = 3, num_classes: int = 2) -> None:
        super().__init__()
        self.down = nn.ModuleList([DoubleConv(in_channels, WIDTHS[0])])
        self.down.extend(DoubleConv(a, b) for a, b in zip(WIDTHS[:-1], WIDTHS[1:], strict=True))
        self.pool = nn.MaxPool2d(2)
        self.up = nn.ModuleList(Up(a, b) for a, b in zip(WIDTHS[:0:-1], WIDTHS[-2::-1], strict=True))
        self.head = nn.Conv2d(WIDTHS[0], num_classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for index, block in enumerate(self.down):
            x = block(x if index == 0 else self.pool(x))
            skips.append(x)
        x = skips.pop()
        for block in self.up:
            x = block(x, skips.pop())
        return self.head(x)
