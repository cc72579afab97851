"""Rating protocols: one object per protocol that every other part of the site asks.

Pure Python (no Django) so the analysis layer, importers and the rating UI share one definition.
Each protocol (``base.Protocol``) validates the study's settings (filling defaults) and one
rating's values and answers, and says what its studies are: dimensions and scales, unit and
screen kind, agreement level, headline and derived scores, layouts, plots and exports. Errors
are ``ProtocolError`` with a message a rater or a researcher can act on.

A new protocol is one new module here (a ``Protocol`` subclass, registered in PROTOCOLS) plus its
rating-screen templates.
"""

from __future__ import annotations

from analysis.science.protocols.base import (
    COMPARISON,
    DEFAULT_AGREEMENT_THRESHOLD,
    ITEM,
    NO,
    OPTIONAL_SETTINGS,
    TRIAL,
    YES,
    Dimension,
    Protocol,
    ProtocolError,
)
from analysis.science.protocols.evalmi import EVALMI, EvalMiProtocol
from analysis.science.protocols.imagenhub import (
    ARTIFACTS,
    DESCRIPTION_EDITORS,
    FOLLOWING,
    IMAGENHUB,
    IMAGENHUB_CONDITIONS,
    IMAGENHUB_TASKS,
    IMAGENHUB_VALUES,
    OBJECTS,
    PERCEPTUAL_MARKS,
    PQ_LABEL,
    SC_LABEL,
    UNUSUAL_SENSE,
    ImagenHubProtocol,
    overall,
)
from analysis.science.protocols.pairwise import PAIRWISE, PAIRWISE_CHOICES, PairwiseProtocol, pairwise_side

PROTOCOLS: dict[str, Protocol] = {p.key: p for p in (ImagenHubProtocol(), EvalMiProtocol(), PairwiseProtocol())}


def get_protocol(key: str) -> Protocol:
    try:
        return PROTOCOLS[key]
    except KeyError:
        raise ProtocolError(f"unknown protocol {key!r}; use one of {', '.join(PROTOCOLS)}") from None


get = get_protocol


def protocol_for(study_or_key) -> Protocol:
    """The protocol object of a study (anything with a ``protocol`` key) or of a key."""
    return get_protocol(study_or_key if isinstance(study_or_key, str) else study_or_key.protocol)


__all__ = [
    "ARTIFACTS", "COMPARISON", "DEFAULT_AGREEMENT_THRESHOLD", "DESCRIPTION_EDITORS", "EVALMI", "FOLLOWING",
    "IMAGENHUB", "IMAGENHUB_CONDITIONS", "IMAGENHUB_TASKS", "IMAGENHUB_VALUES", "ITEM", "NO", "OBJECTS",
    "OPTIONAL_SETTINGS", "PAIRWISE", "PAIRWISE_CHOICES", "PERCEPTUAL_MARKS", "PQ_LABEL", "PROTOCOLS", "SC_LABEL", "TRIAL", "UNUSUAL_SENSE",
    "YES", "Dimension", "EvalMiProtocol", "ImagenHubProtocol", "PairwiseProtocol", "Protocol", "ProtocolError",
    "get", "get_protocol", "overall", "pairwise_side", "protocol_for",
]
