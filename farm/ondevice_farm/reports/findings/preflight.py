"""The pre-flight prediction against what the device did."""

from __future__ import annotations

from dataclasses import dataclass, field

from ondevice_farm.reports.findings.base import Finding


@dataclass
class PreflightCheck:
    """For one job: the source nodes pre-flight said would not run on the accelerator, and the
    nodes the device actually ran on its CPU."""

    label: str
    predicted: list[str]
    observed: list[str]
    reasons: dict[str, str] = field(default_factory=dict)
    #: node -> the documented condition under which the provider takes it (pre-flight cannot check it)
    conditions: dict[str, str] = field(default_factory=dict)

    def describe_unexpected(self) -> list[str]:
        return [
            f"{n} (documented: {self.conditions[n]})" if n in self.conditions else n for n in self.unexpected
        ]

    @property
    def confirmed(self) -> list[str]:
        return [n for n in self.predicted if n in set(self.observed)]

    @property
    def unexpected(self) -> list[str]:
        return [n for n in self.observed if n not in set(self.predicted)]

    @property
    def avoided(self) -> list[str]:
        return [n for n in self.predicted if n not in set(self.observed)]


def preflight_mismatch(checks: list[PreflightCheck]) -> list[Finding]:
    """Nodes the device ran on its CPU that the documented op support said it would take: the
    documented condition did not hold (a shape, an attribute, a driver), worth a look."""
    findings = []
    for check in checks:
        if check.unexpected:
            names = ", ".join(check.describe_unexpected()[:5])
            findings.append(
                Finding(
                    "preflight_mismatch",
                    0.45,
                    (
                        f"{len(check.unexpected)} op(s) ran on CPU on {check.label} although its "
                        "documented op support "
                        f"takes them ({names}): a condition of the provider did not hold"
                    ),
                    {"column": check.label, "unexpected": check.unexpected, "confirmed": check.confirmed},
                )
            )
    return findings
