#!/usr/bin/python3
"""make_resnet_names.py - the state_dict names and shapes of the ResNets, for tests/models.

    /usr/bin/python3 scripts/make_resnet_names.py     # (re)writes tests/data/resnet/<model>.names

Each file has one line per state_dict entry, in order: "<name> <dtype> <d0>x<d1>x..." (a scalar
has the shape "()"). resnet18/34/50 come from torchvision.models.resnetXX(num_classes=10);
resnet20 from the small CIFAR ResNet below (He et al. 2016, section 4.2), written in torchvision's
pattern (conv1, bn1, layerK.I.convJ/bnJ, layerK.I.downsample.0/1 conv1x1 + BN, fc), which is the
naming ringgrad uses for it. A 3-channel input; the CIFAR net has 10 classes.
"""
import os

import torch.nn as nn
import torchvision

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "resnet")


class BasicBlock(nn.Module):
    def __init__(self, inp, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inp, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inp != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inp, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))

    def forward(self, x):
        out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
        return self.relu(out + (self.downsample(x) if self.downsample is not None else x))


class CifarResNet(nn.Module):
    def __init__(self, n, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        inp = 16
        for k, planes in enumerate((16, 32, 64)):
            blocks = []
            for i in range(n):
                blocks.append(BasicBlock(inp, planes, 2 if (k > 0 and i == 0) else 1))
                inp = planes
            setattr(self, "layer%d" % (k + 1), nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(self.avgpool(x).flatten(1))


DT = {"torch.float32": "F32", "torch.int64": "I64"}


def write(name, model):
    lines = []
    for k, v in model.state_dict().items():
        shape = "x".join(str(d) for d in v.shape) if v.dim() else "()"
        lines.append("%s %s %s\n" % (k, DT[str(v.dtype)], shape))
    path = os.path.join(OUT, name + ".names")
    with open(path, "w") as f:
        f.writelines(lines)
    print("wrote", path, len(lines), "entries")


def main():
    os.makedirs(OUT, exist_ok=True)
    for name in ("resnet18", "resnet34", "resnet50"):
        write(name, getattr(torchvision.models, name)(num_classes=10))
    write("resnet20", CifarResNet(3))


if __name__ == "__main__":
    main()
