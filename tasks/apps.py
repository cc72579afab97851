from django.apps import AppConfig


class TasksConfig(AppConfig):
    name = "tasks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from tasks import build_services, jobs
        from tasks.provenance import connect_signals

        connect_signals()
        # The build job sits above the service that stores a build.
        build_services.build_queued.connect(jobs.study_build_queue, dispatch_uid="tasks.jobs.study_build_queue")
