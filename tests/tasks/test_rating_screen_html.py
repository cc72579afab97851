"""What the rating screen's form shows and posts, read from its HTML: every question's legend,
every choice's field name, value, key, label, hint and checked state, and the pictures.

The questions and pictures are written by Python filters (tasks/templatetags/rating_screen.py),
not by the template engine; these tests pin their markup for ImagenHub (scales and checklist),
EvalMi (Likert + yes/no, long Likert scales) and pairwise screens, and that text from researchers
and crowds is escaped.
"""

import re
from html.parser import HTMLParser

import pytest

from tasks.models import Assignment, Comparison
from tests.factories import make_attention_check, make_instance, make_item, make_study

pytestmark = pytest.mark.django_db


_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class _Screen(HTMLParser):
    """Questions (legend parts and choices) and pictures of a rendered screen; fails on a
    misnested element."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.questions: list[dict] = []
        self.pictures: list[dict] = []
        self.sides: list[str] = []
        self._stack: list[str] = []  # open elements
        self._targets: list[tuple[int, _Slot | None]] = []  # (depth, where its text goes)
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = a.get("class") or ""
        if tag in _VOID:  # no end tag
            self._void(tag, a)
            return
        self._stack.append(tag)
        slot = None
        if tag == "fieldset" and "question" in cls:
            self.questions.append({"class": cls, "legend": "", "help": "", "key_hint": "", "choices": []})
        elif tag == "legend":
            slot = _Slot(self.questions[-1], "legend")
        elif tag == "span" and cls == "help":
            slot = _Slot(self.questions[-1], "help")
        elif tag == "span" and cls == "key-hint":
            assert a.get("data-testid") == "key-hint"
            slot = _Slot(self.questions[-1], "key_hint")
        elif tag == "label" and cls == "choice":
            self.questions[-1]["choices"].append({"data-key": a.get("data-key"), "kbd": "", "label": "", "hint": ""})
        elif tag == "span" and cls.startswith("choice-body"):
            self.questions[-1]["choices"][-1]["key_only"] = cls == "choice-body key-only-body"
        elif tag == "kbd" and "label" in self._stack:
            slot = _Slot(self.questions[-1]["choices"][-1], "kbd")
        elif tag == "span" and cls in ("choice-label", "visually-hidden"):
            slot = _Slot(self.questions[-1]["choices"][-1], "label")
        elif tag == "span" and cls == "choice-hint":
            slot = _Slot(self.questions[-1]["choices"][-1], "hint")
        elif tag == "a" and cls == "zoom":
            self._zoom = {"href": a["href"], "data-full": a["data-full"], "target": a["target"], "rel": a["rel"]}
        elif tag == "figcaption" and "side" in self._figure_class:
            self.sides.append("")
            slot = _Slot(self.sides, len(self.sides) - 1)
        if tag == "figure":
            self._figure_class = cls
        self._targets.append((len(self._stack), slot))

    _zoom: dict | None = None
    _figure_class = ""

    def _void(self, tag, a):
        if tag == "input" and a.get("type") == "radio":
            self.questions[-1]["choices"][-1].update(name=a["name"], value=a["value"], checked="checked" in a)
        elif tag == "img" and self._zoom is not None:
            self.pictures.append({**self._zoom, "src": a["src"], "srcset": a["srcset"], "width": a["width"],
                                  "height": a["height"], "alt": a["alt"], "decoding": a["decoding"]})

    def handle_endtag(self, tag):
        assert self._stack and self._stack[-1] == tag, (tag, self._stack)
        if self._targets and self._targets[-1][0] == len(self._stack):
            _, slot = self._targets.pop()
            if slot is not None:
                slot.strip()
        self._stack.pop()
        if tag == "a":
            self._zoom = None

    def handle_data(self, data):
        slot = next((slot for _, slot in reversed(self._targets) if slot is not None), None)
        if slot is not None:
            slot.add(data)


class _Slot:
    """Where the text of an element goes: ``target[key]``, stripped when the element ends."""

    def __init__(self, target, key):
        self.target, self.key = target, key

    def add(self, text):
        self.target[self.key] += text

    def strip(self):
        self.target[self.key] = self.target[self.key].strip()


def _ready(client, study, pid="P1") -> str:
    client.get(f"/s/{study.slug}/start?PROLIFIC_PID={pid}")
    client.post(f"/s/{study.slug}/consent", {"agree": "yes"})
    client.post(f"/s/{study.slug}/instructions")
    return client.get(f"/s/{study.slug}/rate").url


def _choices(name, rows, checked=None):
    """rows: (value, key, kbd, label, hint, key_only)."""
    return [{"name": name, "value": v, "data-key": k, "kbd": kbd, "label": label, "hint": hint, "key_only": key_only,
             "checked": v == checked} for v, k, kbd, label, hint, key_only in rows]


def _imagenhub(prefix, sc=None, pq=None):
    return [
        {"class": "question q-scale", "legend": "Semantic consistency",
         "help": "Does it follow every condition?", "key_hint": "",
         "choices": _choices(f"{prefix}SC", [
             ("0", "1", "1", "0 · Not following", "ignores a condition", False),
             ("0.5", "2", "2", "0.5 · Partly", "some conditions only partly met", False),
             ("1", "3", "3", "1 · Following", "the overall idea is right", False)], sc)},
        {"class": "question q-scale", "legend": "Perceptual quality",
         "help": "Does it look natural and clean?", "key_hint": "",
         "choices": _choices(f"{prefix}PQ", [
             ("0", "1", "1", "0 · Poor", "distorted, objects unrecognisable", False),
             ("0.5", "2", "2", "0.5 · Acceptable", "minor artifacts or unnatural", False),
             ("1", "3", "3", "1 · Genuine", "looks real and clean", False)], pq)},
    ]


def test_an_imagenhub_screen_shows_both_scales_with_keys_labels_hints_and_the_output_picture(client):
    study = make_study(units_per_session=1)
    item = make_item(study)
    url = _ready(client, study)
    screen = _Screen(client.get(url).content.decode())
    prefix = "u0-"
    assert screen.questions == _imagenhub(prefix)
    sha = item.image.sha256
    assert screen.pictures == [{"href": f"/img/{sha}/full", "data-full": f"/img/{sha}/full", "target": "_blank",
                                "rel": "noopener", "src": f"/img/{sha}/768", "srcset": f"/img/{sha}/768 1x",
                                "width": "32", "height": "32", "alt": "generated image 1", "decoding": "async"}]


def test_a_revisited_or_refused_screen_has_the_earlier_choices_checked(client):
    study = make_study(units_per_session=2)
    make_item(study)
    make_item(study)
    url = _ready(client, study)
    prefix = "u0-"
    refused = client.post(url, {f"{prefix}SC": "0.5"})  # PQ missing: shown again, SC kept
    assert refused.status_code == 422
    assert _Screen(refused.content.decode()).questions == _imagenhub(prefix, sc="0.5")
    client.post(url, {f"{prefix}SC": "1", f"{prefix}PQ": "0"})
    assert _Screen(client.get(url).content.decode()).questions == _imagenhub(prefix, sc="1", pq="0")


def test_checklist_mode_shows_one_question_per_condition_and_the_extra_checks(client):
    study = make_study(units_per_session=1, task_type="control_guided_generation", settings={"checklist_mode": True})
    make_item(study)
    url = _ready(client, study)
    questions = _Screen(client.get(url).content.decode()).questions
    prefix = "u0-c-"
    following = [("no", "1", "1", "No following at all", "", False), ("some", "2", "2", "Follows some part", "", False),
                 ("most", "3", "3", "Follows most of it", "", False)]
    assert [(q["class"], q["legend"], q["choices"][0]["name"]) for q in questions] == [
        ("question q-checklist", "Control image layout", f"{prefix}control"),
        ("question q-checklist", "Prompt", f"{prefix}prompt"),
        ("question q-checklist", "Objects in the image", f"{prefix}objects"),
        ("question q-checklist", "Artifacts", f"{prefix}artifacts"),
        ("question q-checklist", "Unusual sense", f"{prefix}unusual"),
    ]
    assert questions[1]["choices"] == _choices(f"{prefix}prompt", following)
    assert questions[3]["choices"] == _choices(f"{prefix}artifacts", [
        ("none", "1", "1", "None or little", "", False), ("some", "2", "2", "Some", "", False),
        ("serious", "3", "3", "Serious", "", False)])


def test_an_evalmi_trial_shows_likert_scales_with_words_and_yes_no_questions_for_each_image(client):
    study = make_study(protocol="evalmi", task_type="counting", units_per_session=2,
                       settings={"images_per_trial": 2})
    instance = make_instance(study, question="Are there three apples?", sub_questions=["Are they red?"])
    make_item(study, instance=instance, model="M1")
    make_item(study, instance=instance, model="M2")
    url = _ready(client, study)
    screen = _Screen(client.get(url).content.decode())
    words = {1: "Bad", 2: "Poor", 3: "Fair", 4: "Good", 5: "Excellent"}
    likert = [(str(v), str(v), str(v), str(v), words[v], True) for v in range(1, 6)]
    yes_no = [("yes", "y", "Y", "Yes", "", False), ("no", "n", "N", "No", "", False)]
    expected = []
    for assignment in Assignment.objects.order_by("slot"):
        p = f"u{assignment.slot}-"
        expected += [
            {"class": "question q-scale", "legend": "Perception",
             "help": "clarity, naturalness, colour, detail", "key_hint": "", "choices": _choices(f"{p}perception", likert)},
            {"class": "question q-scale", "legend": "Correspondence",
             "help": "how well it matches the prompt", "key_hint": "", "choices": _choices(f"{p}correspondence", likert)},
            {"class": "question q-yesno", "legend": "Are there three apples?", "help": "", "key_hint": "",
             "choices": _choices(f"{p}q1", yes_no)},
            {"class": "question q-yesno", "legend": "Are they red?", "help": "", "key_hint": "",
             "choices": _choices(f"{p}q2", yes_no)},
        ]
    assert screen.questions == expected
    assert [p["alt"] for p in screen.pictures] == ["generated image 1", "generated image 2"]


def test_a_long_likert_scale_has_two_digit_keys_and_says_how_to_type_them(client):
    study = make_study(protocol="evalmi", task_type="counting", units_per_session=1,
                       settings={"likert_min": 0, "likert_max": 10, "qa": False, "images_per_trial": 1})
    make_item(study)
    (perception, _) = _Screen(client.get(_ready(client, study)).content.decode()).questions
    p = "u0-"
    hints = {0: "worst", 10: "best"}
    assert perception == {
        "class": "question q-scale", "help": "clarity, naturalness, colour, detail",
        "key_hint": "For 10 type both digits quickly",
        "legend": "Perception",
        "choices": _choices(f"{p}perception", [(str(v), str(v), str(v), str(v), hints.get(v, ""), True)
                                                for v in range(0, 11)]),
    }


def test_a_pairwise_screen_shows_left_and_right_with_their_keys_and_the_preference_choices(client):
    study = make_study(protocol="pairwise", units_per_session=1)
    instance = make_instance(study)
    a, b = make_item(study, instance=instance, model="A"), make_item(study, instance=instance, model="B")
    Comparison.objects.create(study=study, item_a=a, item_b=b)
    screen = _Screen(client.get(_ready(client, study)).content.decode())
    assignment = Assignment.objects.get()
    assert screen.sides == ["Left 1", "Right 2"]
    assert screen.questions == [{
        "class": "question q-preference", "legend": "Which image is better?",
        "help": "Follows the prompt better and looks better overall", "key_hint": "",
        "choices": _choices("u0-preference", [
            ("left", "1", "1", "Left is better", "", False), ("right", "2", "2", "Right is better", "", False),
            ("tie", "3", "3", "About the same", "", False), ("both_bad", "4", "4", "Both are bad", "", False)]),
    }]
    left, right = (a, b) if assignment.presentation["left"] == "A" else (b, a)
    assert [(p["src"], p["alt"]) for p in screen.pictures] == [
        (f"/img/{left.image.sha256}/768", "left image"), (f"/img/{right.image.sha256}/768", "right image")]


def test_researcher_and_crowd_text_on_the_screen_is_escaped(client):
    study = make_study(protocol="evalmi", task_type="counting", units_per_session=1,
                       settings={"images_per_trial": 1, "likert_max": 5})
    instance = make_instance(study, prompt="a <script>alert('prompt')</script> & co",
                             question='Is it <script>alert("label")</script>?', sub_questions=["<b>bold</b> & 'q'"])
    make_item(study, instance=instance)
    html = client.get(_ready(client, study)).content.decode()
    assert "<script>alert" not in html and "<b>bold" not in html
    assert "a &lt;script&gt;alert(&#x27;prompt&#x27;)&lt;/script&gt; &amp; co" in html
    assert "Is it &lt;script&gt;alert(&quot;label&quot;)&lt;/script&gt;?" in html
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; &#x27;q&#x27;" in html
    legends = [q["legend"] for q in _Screen(html).questions]
    assert legends[2:] == ['Is it <script>alert("label")</script>?', "<b>bold</b> & 'q'"]  # shown as typed


def test_an_attention_check_instruction_is_shown_escaped(client):
    study = make_study(units_per_session=2)
    make_attention_check(make_item(study), instruction="Choose <img src=x onerror=alert(1)> & 0.5")
    make_item(study)
    url = _ready(client, study)
    html = client.get(url).content.decode()
    if "attention-instruction" not in html:  # the check came second
        prefix = "u0-"
        html = client.get(client.post(url, {f"{prefix}SC": "1", f"{prefix}PQ": "1"}).url).content.decode()
    assert "<img src=x" not in html
    assert '<p class="attention-instruction" role="note">Choose &lt;img src=x onerror=alert(1)&gt; &amp; 0.5</p>' in html


def test_an_imagenhub_subject_set_shows_every_subject_picture_large_enough_to_judge_identity(client):
    """384 px files (768 on dense screens), shown half the column wide: not 84 px thumbnails (issue 14)."""
    from tasks.images import store_image
    from tasks.models import ConditionImage
    from tests.factories import png_bytes

    study = make_study(units_per_session=1, task_type="subject_driven_generation")
    instance = make_instance(study, prompt="a [V] dog")
    images = [store_image(png_bytes((i, 1, 2), size=(400, 200))) for i in range(2)]
    for i, image in enumerate(images):
        ConditionImage.objects.create(instance=instance, role="subject_1", position=i, token="[V]", image=image)
    make_item(study, instance=instance)
    html = client.get(_ready(client, study)).content.decode()
    subjects = _Screen(html).pictures[:2]
    assert [(p["src"], p["srcset"], p["width"], p["height"], p["alt"]) for p in subjects] == [
        (f"/img/{im.sha256}/384", f"/img/{im.sha256}/384 1x, /img/{im.sha256}/768 2x", "384", "192", f"Subject {i + 1}")
        for i, im in enumerate(images)]
    assert re.search(r'<div class="subject-set"><a class="zoom"[^\n]*</a>\n<a class="zoom"', html)
