"""Flask-WTF forms (each carries the CSRF token)."""

from __future__ import annotations

from flask_wtf import FlaskForm
from flask_wtf.file import FileField, FileRequired
from wtforms import (
    BooleanField,
    HiddenField,
    IntegerField,
    PasswordField,
    SelectChoice,
    SelectField,
    StringField,
)
from wtforms.validators import DataRequired, Length, NumberRange, Optional, Regexp

from webui.services.tables import DEFAULT_INDEX_NAME, INDEX_CHOICES, TABLE_TYPES

INSTANT = Regexp(r"^\d{17}$", message="an instant time has 17 digits (yyyyMMddHHmmssSSS)")
OPERATIONS = [SelectChoice("upsert", "upsert (insert new keys, update existing ones)"),
              SelectChoice("insert", "insert (no lookup; existing keys are duplicated)"),
              SelectChoice("delete", "delete (the keys in the file)")]
TABLE_TYPE_LABELS = {
    "COPY_ON_WRITE": "COPY_ON_WRITE: updates rewrite base files (simplest reads)",
    "MERGE_ON_READ": "MERGE_ON_READ: updates go to log files, compaction merges them (cheaper writes)",
}
ROLES = [SelectChoice("viewer"), SelectChoice("operator"), SelectChoice("admin")]


class LoginForm(FlaskForm):
    username = StringField("User", validators=[DataRequired(), Length(max=80)])
    password = PasswordField("Password", validators=[DataRequired(), Length(max=256)])


class ActionForm(FlaskForm):
    """A button that only carries the CSRF token (cancel, logout...)."""


class CreateTableForm(FlaskForm):
    name = StringField("Name", validators=[DataRequired(), Regexp(r"^[A-Za-z][A-Za-z0-9_]{0,63}$",
                                                                  message="letters, digits and _ (start with a letter)")])
    record_key = StringField("Record key field(s)", validators=[DataRequired(), Length(max=255)])
    partition_fields = StringField("Partition field(s)", validators=[Optional(), Length(max=255)])
    precombine_field = StringField("Precombine field", validators=[Optional(), Length(max=255)])
    table_type = SelectField("Type", choices=[SelectChoice(t, TABLE_TYPE_LABELS[t]) for t in TABLE_TYPES],
                             default=TABLE_TYPES[0])
    index = SelectField("Index", choices=[SelectChoice(i) for i in INDEX_CHOICES], default=DEFAULT_INDEX_NAME)
    hive_style = BooleanField("Hive-style partition folders (field=value)")
    table_version = SelectField("Hudi table version", choices=[
        SelectChoice("6", "6 (Apache Hudi 0.14, 0.15)"), SelectChoice("8", "8 (Apache Hudi 1.0)"),
        SelectChoice("9", "9 (Apache Hudi 1.1)")], default="6")
    cdc_mode = SelectField("Change data capture log", choices=[
        SelectChoice("", "off (changes are inferred from the file versions)"),
        SelectChoice("DATA_BEFORE_AFTER", "DATA_BEFORE_AFTER (both images: fastest change queries)"),
        SelectChoice("DATA_BEFORE", "DATA_BEFORE (the image before)"),
        SelectChoice("OP_KEY_ONLY", "OP_KEY_ONLY (operation and key)")], default="")
    path = StringField("Path (optional; default: under the first warehouse root)", validators=[Optional(), Length(max=1024)])


class RegisterTableForm(FlaskForm):
    path = StringField("Table path", validators=[DataRequired(), Length(max=1024)])
    name = StringField("Name (optional; default: the table's own name)", validators=[Optional(), Length(max=64)])


class UploadForm(FlaskForm):
    file = FileField("Batch file (.csv, .json lines, .parquet)", validators=[FileRequired()])
    operation = SelectField("Operation", choices=OPERATIONS, default="upsert")


class DemoBatchForm(FlaskForm):
    rows = IntegerField("Rows", default=100, validators=[NumberRange(min=1, max=100_000)])
    operation = SelectField("Operation", choices=OPERATIONS, default="upsert")


class ConfirmWriteForm(FlaskForm):
    upload_id = HiddenField(validators=[DataRequired(), Regexp(r"^[a-f0-9]{32}$")])
    operation = HiddenField(validators=[DataRequired()])


class ServiceConfirmForm(FlaskForm):
    instant = HiddenField(validators=[Optional(), INSTANT])
    comment = HiddenField(validators=[Optional(), Length(max=200)])
    partition = HiddenField(validators=[Optional(), Regexp(r"^[a-z][a-z0-9_]{0,99}$")])
    sort_columns = HiddenField(validators=[Optional(), Length(max=1100)])
    layout = HiddenField(validators=[Optional(), Length(max=16)])
    fingerprint = HiddenField(validators=[DataRequired()])
    plan_hash = HiddenField(validators=[DataRequired()])
    confirm_name = StringField("Type the table name to confirm", validators=[Optional(), Length(max=128)])


class PreviewForm(FlaskForm):
    mode = SelectField("Read", choices=[SelectChoice("snapshot", "snapshot (latest)"),
                                        SelectChoice("as_of", "as of an instant"),
                                        SelectChoice("incremental", "incremental since an instant"),
                                        SelectChoice("read_optimized", "read-optimized (base files only)")],
                       default="snapshot")
    instant = StringField("Instant", validators=[Optional(), INSTANT])
    limit = IntegerField("Rows", default=50, validators=[NumberRange(min=1, max=500)])


class NewUserForm(FlaskForm):
    username = StringField("User name", validators=[DataRequired(), Length(max=80)])
    password = PasswordField("Password", validators=[DataRequired(), Length(min=8, max=256)])
    role = SelectField("Role", choices=ROLES)


class RoleForm(FlaskForm):
    role = SelectField("Role", choices=ROLES)


class ChangePasswordForm(FlaskForm):
    current = PasswordField("Current password", validators=[DataRequired(), Length(max=256)])
    new = PasswordField("New password", validators=[DataRequired(), Length(max=256)])
    confirm = PasswordField("New password again", validators=[DataRequired(), Length(max=256)])


class ResetPasswordForm(FlaskForm):
    password = PasswordField("Temporary password", validators=[DataRequired(), Length(min=8, max=256)])
