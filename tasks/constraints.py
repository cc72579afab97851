"""A foreign key over several columns, which Django 5.2 has no field for."""

from __future__ import annotations

from django.core import checks
from django.core.exceptions import ValidationError
from django.db import models
from django.db.utils import DEFAULT_DB_ALIAS


class CompositeForeignKey(models.BaseConstraint):
    """``FOREIGN KEY (fields) REFERENCES <model of fields[0]> (to_fields)``, deferred to commit like
    Django's own keys. ``fields[0]`` is a ``ForeignKey``: the key references that field's model.

    ``Rating`` uses it so that one key check per row proves both that the item exists and that it
    belongs to the rating's study (two checks before, and neither proved the second). The
    referenced fields need a unique constraint on ``to``. As in SQL (MATCH SIMPLE), a row with a
    NULL in any of ``fields`` is not checked. The model keeps its plain ``ForeignKey`` fields
    with ``db_constraint=False`` for the ORM (joins, ``on_delete`` cascades run by Django).

    SQLite cannot add a constraint to an existing table: there it is written into the table
    definition, which Django rebuilds from the model, so it survives later migrations too.
    """

    def __init__(self, *, fields, to_fields, name: str, violation_error_message=None):
        if len(fields) != len(to_fields) or len(fields) < 2:
            raise ValueError("CompositeForeignKey needs two or more fields, as many as to_fields")
        self.fields, self.to_fields = tuple(fields), tuple(to_fields)
        super().__init__(name=name, violation_error_message=violation_error_message)

    def _target(self, model):
        # From the field, not the app registry: SQLite rebuilds tables with models in a registry of their own.
        return model._meta.get_field(self.fields[0]).related_model

    def _parts(self, model, schema_editor) -> dict[str, str]:
        quote = schema_editor.quote_name
        target = self._target(model)
        columns = lambda owner, names: ", ".join(quote(owner._meta.get_field(n).column) for n in names)  # noqa: E731
        return {
            "table": quote(model._meta.db_table), "name": quote(self.name),
            "columns": columns(model, self.fields), "to_table": quote(target._meta.db_table),
            "to_columns": columns(target, self.to_fields),
            "deferrable": schema_editor.connection.ops.deferrable_sql(),
        }

    def constraint_sql(self, model, schema_editor):
        if schema_editor.sql_create_inline_fk is None:
            # Like Django's own foreign keys on such backends: added after every table exists.
            schema_editor.deferred_sql.append(self.create_sql(model, schema_editor))
            return None
        # SQLite's grammar, deferred as Django's inline foreign keys there (sql_create_inline_fk)
        return ("CONSTRAINT %(name)s FOREIGN KEY (%(columns)s) REFERENCES %(to_table)s (%(to_columns)s) "
                "DEFERRABLE INITIALLY DEFERRED" % self._parts(model, schema_editor))

    def create_sql(self, model, schema_editor):
        return ("ALTER TABLE %(table)s ADD CONSTRAINT %(name)s FOREIGN KEY (%(columns)s) "
                "REFERENCES %(to_table)s (%(to_columns)s)%(deferrable)s" % self._parts(model, schema_editor))

    def remove_sql(self, model, schema_editor):
        return "ALTER TABLE %(table)s DROP CONSTRAINT %(name)s" % self._parts(model, schema_editor)

    def validate(self, model, instance, exclude=None, using=DEFAULT_DB_ALIAS):
        if exclude and any(name in exclude for name in self.fields):
            return
        values = [getattr(instance, model._meta.get_field(name).attname) for name in self.fields]
        if any(value is None for value in values):
            return
        target = self._target(model)
        lookup = {target._meta.get_field(name).attname: value for name, value in zip(self.to_fields, values)}
        if not target._default_manager.using(using).filter(**lookup).exists():
            raise ValidationError(self.get_violation_error_message(), code=self.violation_error_code)

    def _check(self, model, connection):
        errors = model._check_local_fields(set(self.fields), "constraints")
        if not errors and not model._meta.get_field(self.fields[0]).many_to_one:
            errors.append(checks.Error(f"{self.name}: the first field must be a ForeignKey", obj=model,
                                       id="tasks.E001"))
        return errors

    def __eq__(self, other):
        if not isinstance(other, CompositeForeignKey):
            return NotImplemented
        return self.deconstruct() == other.deconstruct()

    def __repr__(self) -> str:
        return f"<CompositeForeignKey {self.name}: {self.fields} → {self.to_fields}>"

    def deconstruct(self):
        path, args, kwargs = super().deconstruct()
        kwargs.update(fields=self.fields, to_fields=self.to_fields)
        return path, args, kwargs
