from django.apps import AppConfig


class AnalysisConfig(AppConfig):
    name = "analysis"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings
        from threadpoolctl import threadpool_limits

        # process-wide, before any request or job runs BLAS (settings.BLAS_THREADS says why)
        threadpool_limits(limits=settings.BLAS_THREADS, user_api="blas")

        # A rater's session ended (raters sends it; raters never imports analysis): the owners'
        # notices may be due. The jobs sit above the services that decide when they are due: each
        # service sends a "queued" signal and the job module's receiver queues the Celery job.
        from analysis import export_services, jobs, judge_services, notices, release_services
        from raters import services

        services.session_ended.connect(notices.session_ended, dispatch_uid="analysis.notices.session_ended")
        judge_services.run_queued.connect(jobs.run_judge_queue, dispatch_uid="analysis.jobs.run_judge_queue")
        export_services.export_queued.connect(jobs.study_export_queue, dispatch_uid="analysis.jobs.study_export_queue")
        notices.notices_queued.connect(jobs.study_notices_queue, dispatch_uid="analysis.jobs.study_notices_queue")
        release_services.release_queued.connect(jobs.build_release_queue,
                                                dispatch_uid="analysis.jobs.build_release_queue")
