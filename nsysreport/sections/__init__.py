"""The report's sections: each module builds one part of the model from its query results."""
