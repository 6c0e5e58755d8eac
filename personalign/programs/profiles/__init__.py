"""Behaviour-grounded user profiles (posts or conversations -> descriptors -> short bio).

Not a comparable stage (no human labels for bios exist here, so it defines no ``STAGE``): the
builder is :class:`personalign.programs.profiles.builder.ProfileBuilder` and the profile bank
writer :func:`personalign.programs.profiles.builder.build_profile_bank` (imported lazily).
"""


def __getattr__(name: str):
    if name in ("ProfileBuilder", "build_profile_bank", "find_specifics", "item_text"):
        from personalign.programs.profiles import builder

        return getattr(builder, name)
    raise AttributeError(name)


__all__ = ["ProfileBuilder", "build_profile_bank", "find_specifics", "item_text"]
