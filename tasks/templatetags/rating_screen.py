"""The rating screen's repeated fragments, rendered in Python: question fieldsets and pictures.

A screen GET spent most of its CPU in the template engine walking ``{% include %}``s and
``{% for %}`` loops over choices (a few hundred nodes per screen). These filters write the same
markup directly, escaping every value as the template did (``conditional_escape``: researcher
and crowd text such as prompts and question labels arrive escaped, ``SafeString`` stays as is).

The choices of a question are the same on every screen of a study (only the field name and the
checked value differ), so their markup is built once per distinct set of choices and cached.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from django import template
from django.utils.html import conditional_escape as esc
from django.utils.safestring import SafeString

if TYPE_CHECKING:
    from tasks.rating_context import Picture, Question

register = template.Library()


@register.filter
def picture(p: Picture | None) -> SafeString:
    """An image that opens full size. Ends with a newline, as the included template did, so the
    pictures of a subject set keep the space between them. ``None`` (an item without an image)
    renders the empty link the template rendered."""
    if p is None:
        full = src = srcset = width = height = alt = ""
    else:
        full, src, srcset, width, height, alt = esc(p.full), esc(p.src), esc(p.srcset), p.width, p.height, esc(p.alt)
    return SafeString(
        f'<a class="zoom" href="{full}" target="_blank" rel="noopener" data-full="{full}" title="Show full size">'
        f'<img src="{src}" srcset="{srcset}" width="{width}" height="{height}" alt="{alt}" decoding="async"></a>\n'
    )


@register.filter
def questions(items: list[Question]) -> SafeString:
    """The fieldsets of a panel's questions, radio buttons named ``q.name``, ``q.selected`` checked."""
    return SafeString("".join(map(_question, items)))


def _question(q: Question) -> str:
    legend = esc(q.label)
    if q.help:
        legend += f' <span class="help">{esc(q.help)}</span>'
    hint = q.key_hint
    if hint:
        legend += f' <span class="key-hint" data-testid="key-hint">{esc(hint)}</span>'
    name, selected = esc(q.name), q.selected
    parts = [f'<fieldset class="question q-{esc(q.kind)}" data-question>\n  <legend>{legend}</legend>\n'
             '  <div class="choices">\n  ']
    for value, head, middle, tail in _choices(tuple((c.value, c.label, c.key, c.hint) for c in q.choices)):
        parts += (head, name, middle, " checked" if selected == value else "", tail)
    parts.append("\n  </div>\n</fieldset>\n")
    return "".join(parts)


@lru_cache(maxsize=256)
def _choices(choices: tuple[tuple[str, str, str, str], ...]) -> tuple[tuple[str, str, str, str], ...]:
    """Per choice (value, html before the field name, html between name and checked, html after).

    A choice whose key is its label (a Likert number) shows the key alone, the label for screen
    readers; keys longer than one character are typed as two digits (see Question.key_hint).
    """
    pieces = []
    for value, label, key, hint in choices:
        data_key = f' data-key="{esc(key)}"' if key else ""
        if key == label:
            body = (' key-only-body"><kbd class="key-only" aria-hidden="true">'
                    f'{esc(key)}</kbd><span class="visually-hidden">{esc(label)}</span>')
        else:
            kbd = f"<kbd>{esc(key.upper())}</kbd>" if key else ""
            body = f'">{kbd}<span class="choice-label">{esc(label)}</span>'
        if hint:
            body += f'<span class="choice-hint">{esc(hint)}</span>'
        pieces.append((
            value,
            f'\n    <label class="choice"{data_key}>\n      <input type="radio" name="',
            f'" value="{esc(value)}"',
            f'>\n      <span class="choice-body{body}</span>\n    </label>\n  ',
        ))
    return tuple(pieces)
