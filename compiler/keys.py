"""Every label, annotation, finalizer and gate key flatjob writes or reads, in one place.

T9k's documented keys are kept so that existing `kubectl -l` habits and dashboards still
work; flatjob's own keys live under `flatjob.dev/`.  The runtime selects pods by these keys,
so changing one is a breaking change (pinned by tests/test_keys.py).
"""

# --- API groups -------------------------------------------------------------------------
T9K_GROUP = "batch.tensorstack.dev"
T9K_API_VERSION = f"{T9K_GROUP}/v1beta1"
RECORD_GROUP = "flatjob.dev"  # the in-cluster job record lives here, so the T9k operator never acts on it
RECORD_API_VERSION = f"{RECORD_GROUP}/v1beta1"
PODGROUP_API_VERSION = "scheduler.tensorstack.dev/v1beta1"
RECORD_PLURALS = {  # the record's resource per kind (its CRD's plural)
    "GenericJob": "genericjobs",
    "PyTorchTrainingJob": "pytorchtrainingjobs",
    "DeepSpeedJob": "deepspeedjobs",
    "ColossalAIJob": "colossalaijobs",
}
# `kubectl get pj`, `kubectl get gj`: T9k's short names, as its own `kubectl api-resources`
# prints them (ucman src/api/index.md: caij, dj, gj, pj; the manuals type pj and dj:
# user-manuals src/examples/lane-detection.md, start-llm-finetuning.md).
RECORD_SHORT_NAMES = {"PyTorchTrainingJob": ("pj",), "DeepSpeedJob": ("dj",), "GenericJob": ("gj",), "ColossalAIJob": ("caij",)}

# --- T9k's documented pod labels (user manuals, see docs/architecture.md) ---------------
T9K_OWNER_NAME = "tensorstack.dev/owner-name"  # PyTorchTrainingJob, DeepSpeedJob pods
T9K_COMPONENT = "tensorstack.dev/component"
T9K_COMPONENT_TYPE = "tensorstack.dev/component-type"
GENERICJOB = "genericjob"  # GenericJob pods: genericjob=<job>
GENERICJOB_REPLICA = "genericjob-replica"  # GenericJob pods: <job>-<type>-<rank>
T9K_GROUP_NAME = "scheduler.tensorstack.dev/group-name"
T9K_QUEUE = "scheduler.tensorstack.dev/queue"

# --- Kubernetes recommended labels ------------------------------------------------------
# app.kubernetes.io/instance is deliberately not used: Argo CD's label tracking owns it.
APP_NAME = "app.kubernetes.io/name"
APP_COMPONENT = "app.kubernetes.io/component"
APP_PART_OF = "app.kubernetes.io/part-of"
APP_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "flatjob"

# --- flatjob's own labels ---------------------------------------------------------------
JOB_NAME = "flatjob.dev/job-name"
JOB_KIND = "flatjob.dev/job-kind"
REPLICA_TYPE = "flatjob.dev/replica-type"
REPLICA_INDEX = "flatjob.dev/replica-index"
ROLE = "flatjob.dev/role"  # launcher | worker | node | runtime | tensorboard

# --- flatjob's own annotations ----------------------------------------------------------
VERSION = "flatjob.dev/version"  # flatjob version that rendered an object (record, runtime)
SPEC_HASH = "flatjob.dev/spec-hash"  # digest of a pod's rendered spec: detects edits in git
RUN_MODE = "flatjob.dev/run-mode"  # immediate | debug | pause, on the record
SCHEDULER_TARGET = "flatjob.dev/scheduler"  # per-job choice: t9k | kueue | default
SSH_SECRET = "flatjob.dev/ssh-secret"  # per-job: use this existing Secret for SSH keys
SSH_VOLUME = "flatjob-ssh"  # the pod volume projecting the SSH Secret: the runtime reads which Secret a template's pods mount off it

# --- The release gate (DESIGN §4) -------------------------------------------------------
RELEASE_GATE = "flatjob.dev/release"

# --- On each PodTemplate object (not on the pod): what the runtime needs besides the pod ------
# Git holds every pod as a PodTemplate named as the pod; the runtime creates the pod from it
# (docs/architecture.md §4) and reads these to order, release and judge pods without planning.
RANK = "flatjob.dev/rank"  # global rank in replicaSpec order (rank 0 decides PyTorch/DeepSpeed jobs)
WAVE = "flatjob.dev/wave"  # 0: released with the gang; 1: after every wave-0 pod is Ready (launchers)
SEAT = "flatjob.dev/seat"  # elastic jobs: seat order (the first N seats run)
TRAINING_CONTAINER = "flatjob.dev/training-container"  # whose exit code counts
# kubectl's own: the container `kubectl logs`, `exec` and `attach` pick when none is named
# (kubectl/pkg/cmd/util/podcmd); without it they take the first and say so.
KUBECTL_DEFAULT_CONTAINER = "kubectl.kubernetes.io/default-container"
# On the record: "<count>:<digest of the pod names>", so the runtime acts only once the
# PodTemplates it sees are the set this revision of the record renders.
POD_TEMPLATES = "flatjob.dev/pod-templates"
TENSORBOARD = "flatjob.dev/tensorboard"  # on the record: the TensorBoard Deployment git holds (status.tensorboard)

# --- Kueue ------------------------------------------------------------------------------
KUEUE_QUEUE_NAME = "kueue.x-k8s.io/queue-name"
KUEUE_POD_GROUP_NAME = "kueue.x-k8s.io/pod-group-name"
KUEUE_POD_GROUP_TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
# Kueue's webhook puts this finalizer on every pod it manages and takes it off a Failed pod only
# once a replacement exists (kueue pkg/controller/jobs/pod: PodFinalizer, FindMatchingWorkloads):
# with fixed pod names the replacement cannot exist first, so the runtime takes it off a pod of
# its own that has ended and is being deleted (runtime/decisions, "unhold").
KUEUE_FINALIZER = "kueue.x-k8s.io/managed"
# ... and this scheduling gate, which it takes off once it admits the pod group (constants.go SchedulingGateName).
KUEUE_ADMISSION_GATE = "kueue.x-k8s.io/admission"

# --- A gang scheduler's group, as a pod names it: the runtime releases such a gang whole --
# (a gang binds no member until minMember are ungated, so holding the launcher deadlocks it)
GANG_LABELS = (
    T9K_GROUP_NAME,  # T9k's scheduler
    KUEUE_POD_GROUP_NAME,  # Kueue's pod groups
    "scheduling.x-k8s.io/pod-group",  # scheduler-plugins' coscheduling (apis/scheduling/v1alpha1 PodGroupLabel)
    "pod-group.scheduling.sigs.k8s.io",  # coscheduling before v0.24
)
GANG_ANNOTATIONS = (
    "scheduling.k8s.io/group-name",  # Volcano (apis scheduling/v1beta1 KubeGroupNameAnnotationKey)
    "scheduling.volcano.sh/group-name",  # Volcano (VolcanoGroupNameAnnotationKey)
)

# --- Generated-file header --------------------------------------------------------------
GENERATED_HEADER = "# Code generated by flatjob. DO NOT EDIT: edit the job spec and run `flatjob compile`.\n"

# Which runtime serves a record (runtime/scope.py): its own per-job runtime, or the one
# runtime of its namespace, whose objects (Deployment, ServiceAccount, Role, Lease) are named so.
RUNTIME_MODE = "flatjob.dev/runtime"
RUNTIME_MODE_JOB, RUNTIME_MODE_NAMESPACE = "job", "namespace"
NAMESPACE_RUNTIME = "flatjob"
# Set on the runtime's own pod instead of JOB_NAME, so job selectors never match it.
RUNTIME_FOR = "flatjob.dev/runtime-for"
OPTIONS = "flatjob.dev/options"  # non-default compile options, on the record, as compact JSON

# --- Set by the runtime when it releases a pod (read by the pod through the downward API) --
ATTEMPT = "flatjob.dev/attempt"  # the job's attempt number (group restarts, edits, resumes)
RESTART_COUNT = "flatjob.dev/restart-count"  # restarts the job has had when this pod was released
RESUMING = "flatjob.dev/resuming"  # "true" when the pod starts a resume after a pause
RUNTIME_ANNOTATIONS = (ATTEMPT, RESTART_COUNT, RESUMING)
# Set by the runtime on a pod it stopped after the outcome without deleting it (it also sets
# spec.activeDeadlineSeconds, so the kubelet ends the pod and its log stays): "true".
STOPPED = "flatjob.dev/stopped"
# Set by the runtime on an SSH kind's pod as it releases it: the uid of the `<job>-ssh` Secret it
# trusted then, so a restarted runtime knows its own Secret by a pod it released with it (sshkeys).
SSH_SECRET_UID = "flatjob.dev/ssh-secret-uid"
KUEUE_QUEUE_ANNOTATION = "flatjob.dev/kueue-queue"  # per-job: the Kueue LocalQueue (else the T9k queue name)
