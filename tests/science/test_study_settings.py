"""Per-study analysis settings kept in the protocol settings (validated by analysis.science.protocols)."""

import pytest

from analysis.science.protocols import ProtocolError, get_protocol


@pytest.mark.parametrize("protocol", ["imagenhub", "evalmi", "pairwise"])
def test_every_protocol_accepts_an_agreement_threshold_in_0_to_1(protocol):
    proto = get_protocol(protocol)
    assert "agreement_threshold" not in proto.clean_settings({})  # unset: the site default (0.4) applies
    assert proto.clean_settings({"agreement_threshold": 0.4})["agreement_threshold"] == 0.4
    assert proto.clean_settings({"agreement_threshold": 1})["agreement_threshold"] == 1
    for bad in (0, -0.1, 1.01, "0.5", True, None):
        with pytest.raises(ProtocolError, match=r"agreement_threshold must be a number in \(0, 1\]"):
            proto.clean_settings({"agreement_threshold": bad})
