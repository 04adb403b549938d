"""Device Sign-In user codes are made here (no private Authlib helper), as RFC 8628 advises."""

from __future__ import annotations

import re

from poppy_django.authority.device import USER_CODE_ALPHABET, new_user_code, normalized_user_code


def test_user_codes_are_two_groups_of_four_consonants_and_survive_normalizing() -> None:
    codes = {new_user_code() for _ in range(200)}
    assert len(codes) == 200  # random, not a sequence
    for code in codes:
        assert re.fullmatch(f"[{USER_CODE_ALPHABET}]{{4}}-[{USER_CODE_ALPHABET}]{{4}}", code)
        assert normalized_user_code(code.lower().replace("-", " ")) == code
    assert not set("AEIOUY") & set(USER_CODE_ALPHABET)
