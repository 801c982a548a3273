"""kiln.log -- MindSpore's logging module surface (debug ... critical, get_level, get_log_config)
on Python's logging, configured as MindSpore's is: by the GLOG_* environment variables."""
import logging
import logging.handlers
import os
import sys
import threading

__all__ = ["debug", "info", "warning", "error", "critical", "get_level", "get_log_config"]

# GLOG_v: 0 DEBUG, 1 INFO, 2 WARNING (the default), 3 ERROR, 4 CRITICAL (MindSpore's numbering)
_LEVELS = {"0": logging.DEBUG, "1": logging.INFO, "2": logging.WARNING, "3": logging.ERROR,
           "4": logging.CRITICAL}
_DEFAULT_LEVEL = "2"
_FORMAT = ("[%(levelname)s] KILN(%(process)d,%(threadName)s):%(asctime)s "
           "[%(filename)s:%(lineno)d] %(message)s")
_lock = threading.Lock()
_logger = None


def _env_level():
    level = os.environ.get("GLOG_v", _DEFAULT_LEVEL)
    if level not in _LEVELS:
        raise ValueError(f"kiln.log: GLOG_v must be one of 0, 1, 2, 3, 4, got {level!r}")
    return level


def _config():
    """The logging settings from the environment, checked."""
    config = {"GLOG_v": _env_level(), "GLOG_logtostderr": os.environ.get("GLOG_logtostderr", "1")}
    if config["GLOG_logtostderr"] not in ("0", "1"):
        raise ValueError(f"kiln.log: GLOG_logtostderr must be 0 or 1, got "
                         f"{config['GLOG_logtostderr']!r}")
    if config["GLOG_logtostderr"] == "0":
        log_dir = os.environ.get("GLOG_log_dir")
        if not log_dir:
            raise ValueError("kiln.log: GLOG_logtostderr=0 (log to files) needs GLOG_log_dir")
        config["GLOG_log_dir"] = log_dir
        config["logger_maxBytes"] = int(os.environ.get("logger_maxBytes", 52428800))
        config["logger_backupCount"] = int(os.environ.get("logger_backupCount", 30))
    return config


def _handler(config):
    if config["GLOG_logtostderr"] == "1":
        return logging.StreamHandler(sys.stderr)
    os.makedirs(config["GLOG_log_dir"], exist_ok=True)
    return logging.handlers.RotatingFileHandler(
        os.path.join(config["GLOG_log_dir"], "kiln.log"),
        maxBytes=config["logger_maxBytes"],
        backupCount=config["logger_backupCount"],
    )


def _get_logger():
    """The "kiln" logger, set up from the environment on first use."""
    global _logger
    if _logger is not None:
        return _logger
    with _lock:
        if _logger is None:
            config = _config()
            logger = logging.getLogger("kiln")
            logger.setLevel(_LEVELS[config["GLOG_v"]])
            handler = _handler(config)
            handler.setFormatter(logging.Formatter(_FORMAT))
            logger.addHandler(handler)
            logger.propagate = False
            _logger = logger
    return _logger


def debug(msg, *args, **kwargs):
    _get_logger().debug(msg, *args, stacklevel=2, **kwargs)


def info(msg, *args, **kwargs):
    _get_logger().info(msg, *args, stacklevel=2, **kwargs)


def warning(msg, *args, **kwargs):
    _get_logger().warning(msg, *args, stacklevel=2, **kwargs)


def error(msg, *args, **kwargs):
    _get_logger().error(msg, *args, stacklevel=2, **kwargs)


def critical(msg, *args, **kwargs):
    _get_logger().critical(msg, *args, stacklevel=2, **kwargs)


def exception(msg, *args, **kwargs):
    _get_logger().exception(msg, *args, stacklevel=2, **kwargs)


def get_level():
    """The current level as MindSpore's GLOG_v digit, a str: '0' (DEBUG) ... '4' (CRITICAL)."""
    level = _get_logger().getEffectiveLevel()
    for digit, value in _LEVELS.items():
        if value == level:
            return digit
    return str(min(4, max(0, level // 10 - 1)))  # a level set through logging directly


def get_log_config():
    """The logging settings in effect, keyed by MindSpore's environment variable names."""
    _get_logger()
    config = _config()
    config["GLOG_v"] = get_level()
    return config
