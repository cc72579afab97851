from django.urls import path

from raters import payout_views, views

# The qualification test (raters:qualification) is a rating screen: added in annotation_site.urls.
app_name = "raters"

urlpatterns = [
    path("studies/<slug:slug>/raters/", views.rater_list, name="list"),
    path("studies/<slug:slug>/raters/rules/", views.rules_apply, name="rules_apply"),
    path("studies/<slug:slug>/raters/prolific-decisions.csv", payout_views.prolific_decisions_csv,
         name="prolific_decisions"),
    path("studies/<slug:slug>/raters/gold-candidates/", views.gold_candidates, name="gold_candidates"),
    path("studies/<slug:slug>/raters/<int:rater_id>/", views.rater_detail, name="detail"),
    path("studies/<slug:slug>/raters/<int:rater_id>/decide/", views.rater_decision, name="decide"),
]
