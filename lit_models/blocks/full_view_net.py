"""The full-view baseline of Mnih et al. 2014 (§4.1, Table 1: "FC, 2 layers (64 / 256 hiddens each)"):
the whole canvas flattened -> fully connected ReLU layers -> class logits. It sees every pixel at once,
where the recurrent attention model (``glimpse_net``) sees T small glimpses.

Plain torch; wired by ``lit_models.builders.build_full_view``.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn


def full_view_parameters(*, pixels: int, hidden_size: int, layers: int, num_classes: int) -> int:
    """Weights and biases of :class:`FullViewNet`: ``D·h + h + (layers − 1)(h² + h) + h·C + C``
    for D = C_in·H·W input pixels, h hidden units a layer and C classes."""
    h = hidden_size
    return pixels * h + h + (layers - 1) * (h * h + h) + h * num_classes + num_classes


class FullViewNet(nn.Module):
    """``logits = f_a(ReLU(W_L … ReLU(W_1 vec(x))))``: a multilayer perceptron over the flattened image.

    Args:
        hidden: the fully connected layers, first to last (each followed by a ReLU).
        classifier: Linear(|h|, classes), the read-out (softmax in the loss).
    """

    def __init__(self, *, hidden: list[nn.Linear], classifier: nn.Linear) -> None:
        super().__init__()
        self.hidden = nn.ModuleList(hidden)
        self.classifier = classifier

    def forward(self, images: Tensor) -> Tensor:
        """images (B, C, H, W) -> logits (B, classes)."""
        x = images.flatten(1)  # (B, C·H·W)
        for layer in self.hidden:
            x = F.relu(layer(x))  # (B, h)
        return self.classifier(x)
