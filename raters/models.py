from __future__ import annotations

from django.conf import settings
from django.db import models


class Rater(models.Model):
    """A person who rates: a site user, a crowd worker known only by platform id, or an imported source.

    Crowd raters have no password; the (platform, external_id) pair brings the same worker back to
    the same Rater. Imported raters (e.g. ``rater1`` of an ImagenHub TSV) use platform ``import``.
    """

    class Platform(models.TextChoices):
        LOCAL = "local", "Invited (login)"
        PROLIFIC = "prolific", "Prolific"
        MTURK = "mturk", "Amazon Mechanical Turk"
        IMPORT = "import", "Imported ratings"

    class State(models.TextChoices):
        ACTIVE = "active", "Active"
        PAUSED = "paused", "Paused"
        BLOCKED = "blocked", "Blocked"

    user = models.OneToOneField(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="rater")
    platform = models.CharField(max_length=16, choices=Platform.choices, default=Platform.LOCAL)
    external_id = models.CharField(max_length=200, blank=True, help_text="Crowd worker id or imported rater name")
    state = models.CharField(max_length=16, choices=State.choices, default=State.ACTIVE)
    state_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["platform", "external_id"],
                condition=~models.Q(external_id=""),
                name="rater_unique_platform_external_id",
            ),
        ]

    def __str__(self) -> str:
        if self.user_id:
            return self.user.get_username()
        return f"{self.platform}:{self.external_id}"

    @property
    def can_rate(self) -> bool:
        return self.state == self.State.ACTIVE
